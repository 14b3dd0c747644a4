from django.apps import AppConfig


class GatewayAppConfig(AppConfig):
    name = "gateway_app"
    verbose_name = "Gateway"

    def ready(self) -> None:
        # A rollback (or redo) of a gateway session's compaction changes what the gateway forwards (operator.py).
        from gateway_app import operator
        from sessions_app.gateway_surface import rollout_appended

        rollout_appended.connect(operator.on_rollout_appended, dispatch_uid="gateway-rollback")
        # Exchanges begun by a gateway process that has since ended become cut records (journal.py).
        from gateway_app import journal
        from sessions_app.gateway_surface import housekeeping_done

        housekeeping_done.connect(journal.sweep_on_housekeeping, dispatch_uid="gateway-sweep-cut")
