from django.contrib import admin
from django.urls import include, path
from django.views.generic.base import RedirectView

from compactweb.health import healthz
from compactweb.metrics_endpoint import metrics_view

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("metrics", metrics_view, name="metrics"),
    path("favicon.ico", RedirectView.as_view(url="/static/favicon.svg", permanent=True)),
    path("admin/", admin.site.urls),
    path("api/v1/", include("compactweb.api_urls")),
    path("oidc/", include("compactweb.oidc")),  # single sign-on; 404 while COMPACTWEB_OIDC_ENABLED is off
    path("", include("gateway_app.urls")),
    path("", include("sessions_app.web.urls")),
]

# Styled error pages with the navigation (compactweb.error_pages).
handler403 = "compactweb.error_pages.permission_denied"
handler404 = "compactweb.error_pages.page_not_found"
handler500 = "compactweb.error_pages.server_error"
