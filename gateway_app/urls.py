from django.urls import path

from compactweb import converters  # noqa: F401  (registers the <id:...> path converter)
from gateway_app import views

urlpatterns = [
    path("gateway-sessions/<id:session_id>/<str:action>/", views.gateway_action, name="gateway_action"),
    path("gateway-keys/", views.gateway_keys, name="gateway_keys"),
    path("gateway-keys/<id:key_id>/revoke/", views.gateway_key_revoke, name="gateway_key_revoke"),
]
