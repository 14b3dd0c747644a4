"""The JSON API v1: each app contributes its routes; the OpenAPI schema is published at openapi.json."""

from django.urls import include, path
from drf_spectacular.views import SpectacularJSONAPIView

urlpatterns = [
    path("openapi.json", SpectacularJSONAPIView.as_view(), name="openapi-schema"),
    path("", include("sessions_app.web.api.urls")),
    path("", include("compaction_app.api_urls")),
]
