from django.apps import AppConfig


class SessionsAppConfig(AppConfig):
    name = "sessions_app"
    verbose_name = "Agent sessions"

    def ready(self) -> None:
        from django.db.models.signals import post_migrate

        from compactweb.role_permissions import grant_admin_permissions
        from sessions_app import rollout_guard

        rollout_guard.connect_signals()
        post_migrate.connect(grant_admin_permissions, dispatch_uid="compactweb_admin_permissions")
