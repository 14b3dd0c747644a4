"""The configuration API: providers and policies (the session and compaction routes live in sessions_app.web)."""

from django.urls import path

from compaction_app import api

urlpatterns = [
    path("providers", api.ProviderList.as_view(), name="api-providers"),
    path("providers/<int:pk>", api.ProviderDetail.as_view(), name="api-provider"),
    path("policies", api.PolicyList.as_view(), name="api-policies"),
    path("policies/<int:pk>", api.PolicyDetail.as_view(), name="api-policy"),
]
