"""JSON API for Codex rollout export and import and for replays (operator role): thin wrappers around
sessions_app.transfer's importer, exporter and replay."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator
from itertools import chain, islice

from django.conf import settings
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import BaseParser, FormParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from compaction_app.models import CompactionPolicy, Provider
from compactweb.api_errors import ApiError
from compactweb.converters import MAX_ID
from compactweb.parsers import SafeJSONParser
from compactweb.roles import IsOperator
from sessions_app.codex_rollout import RolloutExportError, RolloutImportError
from sessions_app.codex_rollout.parse import read_lines
from sessions_app.jobs import services as jobs
from sessions_app.jobs.tasks import do_submit_job
from sessions_app.models import Job
from sessions_app.rollout.validation import privileged_line_paths
from sessions_app.transfer import exporter, shipped
from sessions_app.transfer.refusals import InvalidRollout
from sessions_app.transfer.replay import replay_comparison
from sessions_app.web.api.jobs import WAIT_PARAMETER_HELP, JobAcceptedSerializer, answer_job, wants_wait
from sessions_app.web.api.json_lines import JSON_LINES_RESPONSES, json_lines_response
from sessions_app.web.api.lookups import session_or_404
from sessions_app.web.instructing import ensure_may_instruct

EXPORT_LINES_PER_CHUNK = 200


class JsonLinesParser(BaseParser):
    """A raw JSON Lines body (a rollout file sent as is): handed to the view as bytes."""

    media_type = "application/x-ndjson"

    def parse(self, stream, media_type=None, parser_context=None):
        return stream.read() if stream is not None else b""


class ImportFormSerializer(serializers.Serializer):
    file = serializers.FileField(required=False, help_text="The rollout .jsonl file (multipart upload).")
    title = serializers.CharField(required=False, allow_blank=True, max_length=200)
    provider = serializers.IntegerField(required=False, min_value=1, max_value=MAX_ID,
                                        help_text="Provider id (default: the first one).")
    policy = serializers.IntegerField(required=False, min_value=1, max_value=MAX_ID,
                                      help_text="Policy id (default: the first one).")
    new_thread_id = serializers.BooleanField(
        required=False, default=False,
        help_text="Import under a fresh thread id even if this thread was imported before.",
    )
    strict = serializers.BooleanField(
        required=False, default=False,
        help_text="Refuse the whole file if any line is malformed, instead of skipping and reporting such lines.",
    )


class ImportProblemSerializer(serializers.Serializer):
    line = serializers.IntegerField(help_text="1-based line number in the file.")
    reason = serializers.CharField()
    action = serializers.ChoiceField(choices=["skipped", "repaired"])


class ImportResultSerializer(serializers.Serializer):
    session = serializers.IntegerField()
    thread_id = serializers.CharField()
    source_name = serializers.CharField()
    lines_read = serializers.IntegerField()
    lines_imported = serializers.IntegerField()
    kind_counts = serializers.DictField(child=serializers.IntegerField())
    skipped_kinds = serializers.DictField(child=serializers.IntegerField(), help_text="Unknown kinds, skipped.")
    skipped_count = serializers.IntegerField()
    compactions = serializers.IntegerField()
    legacy_compactions_rebuilt = serializers.IntegerField()
    thread_rollbacks = serializers.IntegerField()
    strict = serializers.BooleanField()
    skipped_lines = serializers.IntegerField(help_text="Lines not imported (unparseable, or items not kept).")
    repaired_lines = serializers.IntegerField(help_text="Lines imported after a repair (timestamp, NUL, item).")
    problems = ImportProblemSerializer(many=True)


class ShippedLinesSerializer(serializers.Serializer):
    file = serializers.CharField(max_length=900, help_text="The shipper's key for the file, e.g. host/2026/12/01/rollout-....jsonl.")
    name = serializers.CharField(required=False, allow_blank=True, max_length=255, help_text="The file's name.")
    offset = serializers.IntegerField(min_value=0, max_value=MAX_ID, help_text="The byte of the file the batch starts at.")
    data = serializers.CharField(help_text="The batch's complete lines, base64 of the file's bytes.")
    replaces = serializers.IntegerField(
        required=False, min_value=1, max_value=MAX_ID,
        help_text="The file was rewritten (it is now shorter than what the server has): the offset the server "
                  "had. The batch (from offset 0) starts a new session linked to the old one.")
    provider = serializers.IntegerField(required=False, min_value=1, max_value=MAX_ID,
                                        help_text="Provider id for a new session (default: the first).")
    policy = serializers.IntegerField(required=False, min_value=1, max_value=MAX_ID,
                                      help_text="Policy id for a new session (default: the first).")


class ShippedFileSerializer(serializers.Serializer):
    file = serializers.CharField()
    offset = serializers.IntegerField(help_text="The bytes of the file the server has: the next batch starts here.")
    session = serializers.IntegerField(allow_null=True)
    lines = serializers.IntegerField(help_text="Lines taken from this batch.")


class ReplayRequestSerializer(serializers.Serializer):
    policy = serializers.IntegerField(min_value=1, max_value=MAX_ID, help_text="The policy to replay under.")
    provider = serializers.IntegerField(required=False, min_value=1, max_value=MAX_ID,
                                        help_text="Provider id (default: the original's).")
    title = serializers.CharField(required=False, allow_blank=True, max_length=200)


class FiguresSerializer(serializers.Serializer):
    session = serializers.IntegerField()
    title = serializers.CharField()
    policy = serializers.CharField()
    provider = serializers.CharField()
    compactions = serializers.IntegerField()
    peak_tokens = serializers.IntegerField()
    tokens_saved = serializers.IntegerField()
    final_tokens = serializers.IntegerField()
    final_items = serializers.IntegerField()
    peak_active_tokens = serializers.IntegerField()
    failed_compactions = serializers.IntegerField()


class ComparisonSerializer(serializers.Serializer):
    original = FiguresSerializer()
    replay = FiguresSerializer()
    difference = serializers.DictField(child=serializers.IntegerField())
    failed = serializers.BooleanField(help_text="The replay stopped part way: its figures are partial.")


class ReplayResultSerializer(serializers.Serializer):
    replay = serializers.IntegerField()
    original = serializers.IntegerField()
    turns = serializers.IntegerField()
    compactions = serializers.IntegerField()
    failures = serializers.ListField(child=serializers.CharField())
    comparison = ComparisonSerializer()


def _row(model, pk, name: str):
    if pk is None:
        return None
    try:
        return model.objects.get(pk=pk)
    except model.DoesNotExist:
        raise ApiError(status_code=400, code="invalid", message=f"{name}: {name} {pk} does not exist") from None


class SessionImport(APIView):
    """Import a Codex rollout: a multipart `file`, or the JSON Lines as the raw body (`application/x-ndjson`, with
    title / provider / policy / new_thread_id / strict as query parameters). All or nothing in the database;
tolerant of bad lines (reported in `problems`) unless `strict`."""

    permission_classes = [IsOperator]
    parser_classes = [MultiPartParser, FormParser, JsonLinesParser]

    @extend_schema(
        request={"multipart/form-data": ImportFormSerializer, "application/x-ndjson": OpenApiTypes.STR},
        parameters=[
            OpenApiParameter("title", str, required=False),
            OpenApiParameter("provider", int, required=False),
            OpenApiParameter("policy", int, required=False),
            OpenApiParameter("new_thread_id", bool, required=False),
            OpenApiParameter("strict", bool, required=False),
            OpenApiParameter("wait", bool, required=False, description=WAIT_PARAMETER_HELP),
        ],
        responses={201: ImportResultSerializer, 202: JobAcceptedSerializer},
    )
    def post(self, request):
        body = request.data
        if (request.content_type or "").startswith(JsonLinesParser.media_type) and not isinstance(body, bytes | str):
            body = b""  # an empty body: the importer says the file is empty
        if isinstance(body, bytes | str):
            params, raw, name = request.query_params, body, "request body"
        else:
            params, raw, name = body, None, ""
        form = ImportFormSerializer(data={k: v for k, v in params.items() if k != "file"} | (
            {"file": request.FILES["file"]} if "file" in request.FILES else {}))
        form.is_valid(raise_exception=True)
        values = form.validated_data
        if raw is None:
            upload = values.get("file")
            if upload is None:
                raise ApiError(status_code=400, code="invalid",
                               message="file: upload the rollout as `file`, or send it as an application/x-ndjson body")
            raw, name = upload, upload.name or "upload"
        if isinstance(raw, str):
            raw = raw.encode()
        try:  # one line past the limit refuses the file while it is read (issue 27)
            lines = read_lines(raw.chunks() if hasattr(raw, "chunks") else _pieces(raw if isinstance(raw, bytes)
                                                                                    else b""),
                               max_line_bytes=settings.COMPACTWEB_MAX_IMPORT_LINE_BYTES, source_name=name)
        except RolloutImportError as exc:
            raise InvalidRollout(exc) from None
        ensure_may_instruct(request.user, privileged_line_paths(lines))
        wait = wants_wait(request)
        params = {
            "source_name": name, "title": values.get("title") or None,
            "provider": getattr(_row(Provider, values.get("provider"), "provider"), "pk", None),
            "policy": getattr(_row(CompactionPolicy, values.get("policy"), "policy"), "pk", None),
            "new_thread_id": values.get("new_thread_id", False), "strict": values.get("strict", False),
        }
        if wait and not jobs.runs_on_workers():
            result = jobs.import_rollout(actor=request.user, lines=lines, **params)
            return Response(ImportResultSerializer(result).data, status=status.HTTP_201_CREATED)
        job = do_submit_job(kind=Job.Kind.IMPORT, session_id=None, actor=request.user, params=params,
                            payload=b"".join(lines))
        return answer_job(job, outcome=ImportResultSerializer)


def _pieces(raw: bytes, size: int = 1 << 16) -> Iterator[bytes]:
    view = memoryview(raw)
    for start in range(0, len(raw), size):
        yield bytes(view[start : start + size])


def _batches(lines: Iterator[str]) -> Iterator[str]:
    # Under ASGI every piece is read in Django's sync thread: a thread hop per line would cost more than the line.
    while batch := "".join(islice(lines, EXPORT_LINES_PER_CHUNK)):
        yield batch


class SessionExport(APIView):
    """The session as a Codex rollout JSON Lines file (spec §15), streamed as an attachment."""

    permission_classes = [IsOperator]

    @extend_schema(responses=JSON_LINES_RESPONSES)
    def get(self, request, pk: int):
        session = session_or_404(pk)
        lines = exporter.export_rollout(session=session)
        try:
            first = next(lines)  # the session_meta line: fails early, before the response starts
        except RolloutExportError as exc:
            raise ApiError(status_code=409, code="not_exportable", message=str(exc)) from None
        return json_lines_response(
            request, pieces=_batches(chain([first], lines)),
            filename=exporter.export_filename(session), as_attachment=True,
        )


class SessionReplay(APIView):
    """Replay a session under another policy as a new, linked session, and compare the two."""

    permission_classes = [IsOperator]
    parser_classes = [SafeJSONParser, FormParser, MultiPartParser]

    @extend_schema(
        request=ReplayRequestSerializer,
        parameters=[OpenApiParameter("wait", bool, required=False, description=WAIT_PARAMETER_HELP)],
        responses={201: ReplayResultSerializer, 202: JobAcceptedSerializer},
    )
    def post(self, request, pk: int):
        original = session_or_404(pk)
        data = ReplayRequestSerializer(data=request.data if hasattr(request.data, "get") else {})
        data.is_valid(raise_exception=True)
        values = data.validated_data
        params = {
            "policy": _row(CompactionPolicy, values["policy"], "policy").pk,
            "provider": getattr(_row(Provider, values.get("provider"), "provider"), "pk", None),
            "title": values.get("title") or None,
        }
        wait = wants_wait(request)
        if wait and not jobs.runs_on_workers():
            result = jobs.replay(session_id=original.pk, actor=request.user, **params)
            return Response(ReplayResultSerializer(result).data, status=status.HTTP_201_CREATED)
        job = do_submit_job(kind=Job.Kind.REPLAY, session_id=original.pk, actor=request.user, params=params)
        return answer_job(job, outcome=ReplayResultSerializer)


class SessionComparison(APIView):
    """A replay next to its original: compactions, peak tokens, tokens saved."""

    permission_classes = [IsOperator]

    @extend_schema(responses=ComparisonSerializer)
    def get(self, request, pk: int):
        return Response(ComparisonSerializer(replay_comparison(replay=session_or_404(pk))).data)


class ShippedFileLines(APIView):
    """A shipper's batch of new complete lines of one rollout file (`follow_rollouts --to URL`): applied only at the
    offset the server has (else 409 offset_mismatch naming it), so a batch sent twice is never taken twice."""

    permission_classes = [IsOperator]
    parser_classes = [SafeJSONParser]

    @extend_schema(request=ShippedLinesSerializer, responses={200: ShippedFileSerializer})
    def post(self, request):
        form = ShippedLinesSerializer(data=request.data if hasattr(request.data, "get") else {})
        form.is_valid(raise_exception=True)
        values = form.validated_data
        try:
            data = base64.b64decode(values["data"], validate=True)
        except (binascii.Error, ValueError):
            raise ApiError(status_code=400, code="invalid", message="data: not base64") from None
        # The import's rule (issue 42): a shipped session is replayed and read like an imported one, so a batch
        # that would put developer/system text or a compaction into it is the support role's, refused before
        # anything of it is stored. Its lines are numbered within the batch.
        ensure_may_instruct(request.user, [f"data {path}" for path in privileged_line_paths(data.splitlines())])
        result = shipped.do_receive_shipped_lines(
            user=request.user, file=values["file"], offset=values["offset"], data=data,
            name=values.get("name", ""), replaces=values.get("replaces"),
            provider=_row(Provider, values.get("provider"), "provider"),
            policy=_row(CompactionPolicy, values.get("policy"), "policy"))
        return Response(ShippedFileSerializer(result).data)


class ShippedFileOffset(APIView):
    """How much of a shipped file the server has: where a (re)started shipper sends from."""

    permission_classes = [IsOperator]

    @extend_schema(parameters=[OpenApiParameter("file", str, required=True)], responses={200: ShippedFileSerializer})
    def get(self, request):
        return Response(ShippedFileSerializer(shipped.shipped_offset(
            user=request.user, file=request.query_params.get("file", ""))).data)
