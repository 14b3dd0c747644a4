"""JSON API for retention's archives (admin role, as in Django admin: docs/security.md, docs/retention-policy.md):
list the archive records, read one, restore one by importing its file. Thin wrappers around
sessions_app.archive.selectors and .services; refusals answer in the API's error shape (404 no such archive,
409 restored already or the file missing or changed)."""

from __future__ import annotations

from datetime import datetime

from django.utils.http import urlencode
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from compaction_app.models import ArchivedShare
from compactweb.converters import MAX_ID
from compactweb.roles import IsAdminRole
from sessions_app.archive import selectors, services
from sessions_app.models import SessionArchive
from sessions_app.web.api.lookups import found

ERRORS = {
    404: OpenApiResponse(description="no such archive"),
}
RESTORE_ERRORS = {
    **ERRORS,
    409: OpenApiResponse(
        description="restored already (`already_imported`), or its file is missing or no longer what the record "
        "says (`archive_not_restorable`)"
    ),
    400: OpenApiResponse(description="the file cannot be imported (no provider or policy configured)"),
}


class ArchiveListQuerySerializer(serializers.Serializer):
    before = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=MAX_ID,
        help_text="The next page: archives older than this one.",
    )
    since = serializers.DateTimeField(required=False, help_text="Only archives made at or after this time.")
    until = serializers.DateTimeField(required=False, help_text="Only archives made before this time.")
    limit = serializers.IntegerField(default=100, min_value=1, max_value=1000)


class ArchiveSerializer(serializers.ModelSerializer):
    restored_at = serializers.SerializerMethodField(
        help_text="When a restore moved its compactions back into the analytics of the restored session (null: "
        "not restored through the API, the admin or restore_archive since analytics kept archived shares)."
    )

    class Meta:
        model = SessionArchive
        fields = [
            "id",
            "session_id",
            "thread_id",
            "title",
            "source",
            "provider_id",
            "policy_id",
            "session_created_at",
            "last_activity_at",
            "file_name",
            "export_name",
            "sha256",
            "file_lines",
            "export_bytes",
            "compressed_bytes",
            "rollout_lines",
            "last_seq",
            "archived_at",
            "archived_by",
            "run",
            "restored_at",
        ]
        read_only_fields = fields

    def get_restored_at(self, archive) -> datetime | None:
        try:
            return archive.analytics_share.restored_at
        except ArchivedShare.DoesNotExist:  # archived before analytics kept archived shares
            return None


class ArchiveRestoreSerializer(serializers.Serializer):
    archive = serializers.IntegerField()
    session = serializers.IntegerField(help_text="The restored session (a new id).")
    lines_imported = serializers.IntegerField()
    compactions = serializers.IntegerField()


class ArchiveList(APIView):
    permission_classes = [IsAdminRole]

    @extend_schema(
        parameters=[ArchiveListQuerySerializer],
        responses={200: ArchiveSerializer(many=True), 400: OpenApiResponse(description="bad filter")},
    )
    def get(self, request):
        query = ArchiveListQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        f = query.validated_data
        rows = selectors.list_archives(
            before=f.get("before"), since=f.get("since"), until=f.get("until"), limit=f["limit"] + 1
        )
        page = rows[: f["limit"]]
        response = Response(ArchiveSerializer(page, many=True).data)
        if len(rows) > f["limit"]:  # a keyset page: the next one starts after this page's last record
            params = {k: request.query_params[k] for k in ("since", "until") if k in request.query_params}
            params.update(before=page[-1].pk, limit=f["limit"])
            response["Link"] = f'<{request.build_absolute_uri(request.path)}?{urlencode(params)}>; rel="next"'
        return response


class ArchiveDetail(APIView):
    permission_classes = [IsAdminRole]

    @extend_schema(responses={200: ArchiveSerializer, **ERRORS})
    def get(self, request, pk: int):
        archive = found(
            "archive", pk, lambda: SessionArchive.objects.select_related("analytics_share").get(pk=pk)
        )
        return Response(ArchiveSerializer(archive).data)


class ArchiveRestore(APIView):
    permission_classes = [IsAdminRole]

    @extend_schema(request=None, responses={201: ArchiveRestoreSerializer, **RESTORE_ERRORS})
    def post(self, request, pk: int):
        found("archive", pk, lambda: SessionArchive.objects.get(pk=pk))
        result = services.do_restore_archive(archive_id=pk, actor=request.user)
        body = {
            "archive": pk,
            "session": result.session.pk,
            "lines_imported": result.lines_imported,
            "compactions": result.compactions,
        }
        return Response(ArchiveRestoreSerializer(body).data, status=status.HTTP_201_CREATED)
