from django.apps import AppConfig


class SessionsAppConfig(AppConfig):
    name = "sessions_app"
    verbose_name = "Agent sessions"

    def ready(self) -> None:
        from django.db.models.signals import post_migrate

        # The Celery app, before anything can send a task (what compactweb/__init__.py did; see there why not).
        import compactweb.celery  # noqa: F401
        from compactweb import metrics, role_permissions, ws_revocation
        from compactweb.role_permissions import grant_admin_permissions
        from sessions_app import rollout_guard
        from sessions_app.archive import tasks as archive_tasks
        from sessions_app.compactions import alert_delivery, alerts
        from sessions_app.fleet import runtime as fleet_runtime
        from sessions_app.fleet import scheduler
        from sessions_app.jobs import liveness
        from sessions_app.rollout.signals import holder_lost
        from sessions_app.turns import ends as turn_ends
        from sessions_app.web import metrics_state

        rollout_guard.connect_signals()
        role_permissions.connect_signals()
        ws_revocation.connect_signals()
        post_migrate.connect(grant_admin_permissions, dispatch_uid="compactweb_admin_permissions")
        alerts.pause_requested.connect(fleet_runtime.pause_for_alert, dispatch_uid="compactweb_pause_on_alert")
        alerts.alert_changed.connect(alert_delivery.on_alert_changed, dispatch_uid="compactweb_deliver_alerts")
        holder_lost.connect(turn_ends.end_dead_holders_turn, dispatch_uid="compactweb_end_dead_holders_turn")
        scheduler.housekeeping_done.connect(liveness.reap_dead_jobs, dispatch_uid="compactweb_reap_dead_jobs")
        scheduler.housekeeping_done.connect(archive_tasks.archive_if_due, dispatch_uid="compactweb_archive_if_due")
        scheduler.housekeeping_done.connect(alert_delivery.retry_if_due, dispatch_uid="compactweb_alert_retries")
        metrics.add_state_source("sessions", metrics_state.state_metrics)
        # The apps are ready: a process whose entry point paused the cyclic collector for its start gets it back,
        # with what start-up built frozen (compactweb/startup_gc.py).
        from compactweb.startup_gc import end_startup_pause

        end_startup_pause()
