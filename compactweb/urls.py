from django.contrib import admin
from django.urls import include, path

from compactweb.health import healthz

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("admin/", admin.site.urls),
    path("api/v1/", include("compactweb.api_urls")),
    path("", include("sessions_app.web.urls")),
]
