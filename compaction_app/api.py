"""JSON API views for providers and policies: reads need operator, writes need admin."""

from __future__ import annotations

from rest_framework import generics

from compaction_app.config_audit import AuditedApiMixin
from compaction_app.models import CompactionPolicy, Provider
from compaction_app.serializers import CompactionPolicySerializer, ProviderSerializer
from compactweb.roles import ReadOperatorWriteAdmin


class ProviderList(AuditedApiMixin, generics.ListCreateAPIView):
    queryset = Provider.objects.all()
    serializer_class = ProviderSerializer
    permission_classes = [ReadOperatorWriteAdmin]


class ProviderDetail(AuditedApiMixin, generics.RetrieveUpdateAPIView):
    queryset = Provider.objects.all()
    serializer_class = ProviderSerializer
    permission_classes = [ReadOperatorWriteAdmin]
    http_method_names = ["get", "patch", "head", "options"]


class PolicyList(AuditedApiMixin, generics.ListCreateAPIView):
    queryset = CompactionPolicy.objects.prefetch_related("hooks")
    serializer_class = CompactionPolicySerializer
    permission_classes = [ReadOperatorWriteAdmin]


class PolicyDetail(AuditedApiMixin, generics.RetrieveUpdateAPIView):
    queryset = CompactionPolicy.objects.prefetch_related("hooks")
    serializer_class = CompactionPolicySerializer
    permission_classes = [ReadOperatorWriteAdmin]
    http_method_names = ["get", "patch", "head", "options"]
