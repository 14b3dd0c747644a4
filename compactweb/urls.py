from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/v1/", include("compactweb.api_urls")),
    path("", include("sessions_app.urls")),
]
