"""The configuration API: providers and policies (the session and compaction routes live in sessions_app.web)."""

from django.urls import path

from compaction_app import api
from compactweb import converters  # noqa: F401  (registers the <id:...> path converter)

urlpatterns = [
    path("providers", api.ProviderList.as_view(), name="api-providers"),
    path("providers/<id:pk>", api.ProviderDetail.as_view(), name="api-provider"),
    path("policies", api.PolicyList.as_view(), name="api-policies"),
    path("policies/<id:pk>", api.PolicyDetail.as_view(), name="api-policy"),
]
