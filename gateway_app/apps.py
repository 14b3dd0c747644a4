from django.apps import AppConfig


class GatewayAppConfig(AppConfig):
    name = "gateway_app"
    verbose_name = "Gateway"
