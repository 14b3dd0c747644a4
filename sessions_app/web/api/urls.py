from django.urls import include, path

from compactweb import converters  # noqa: F401  (registers the <id:...> path converter)
from sessions_app.web.api import alerts as api_alerts
from sessions_app.web.api import analytics as api_analytics
from sessions_app.web.api import archives as api_archives
from sessions_app.web.api import compactions as api_compactions
from sessions_app.web.api import fleet as api_fleet
from sessions_app.web.api import jobs as api_jobs
from sessions_app.web.api import pins as api_pins
from sessions_app.web.api import rollback as api_rollback
from sessions_app.web.api import sessions as api
from sessions_app.web.api import transfer as api_transfer
from sessions_app.web.api import turns as api_turns

urlpatterns = [
    path("sessions", api.SessionList.as_view(), name="api-sessions"),
    path("sessions/import", api_transfer.SessionImport.as_view(), name="api-session-import"),
    path("sessions/<id:pk>", api.SessionDetail.as_view(), name="api-session"),
    # What one session answers: its history and rollout, compactions, export and replays (issue 7), turns
    # (issue 5) and pinned context (issue 18).
    path("sessions/<id:pk>/", include([
        path("history", api.SessionHistory.as_view(), name="api-session-history"),
        path("items", api.SessionItems.as_view(), name="api-session-items"),
        path("rollout", api.SessionRollout.as_view(), name="api-session-rollout"),
        path("compact", api_compactions.SessionCompact.as_view(), name="api-session-compact"),
        path("attempts", api_compactions.SessionAttempts.as_view(), name="api-session-attempts"),
        path("compactions", api_compactions.SessionCompactions.as_view(), name="api-session-compactions"),
        path("export", api_transfer.SessionExport.as_view(), name="api-session-export"),
        path("replay", api_transfer.SessionReplay.as_view(), name="api-session-replay"),
        path("comparison", api_transfer.SessionComparison.as_view(), name="api-session-comparison"),
        path("thread-rollback", api_rollback.SessionThreadRollback.as_view(), name="api-session-thread-rollback"),
        path("turns", api_turns.SessionTurns.as_view(), name="api-session-turns"),
        path("pins", api_pins.SessionPins.as_view(), name="api-session-pins"),
        path("pins/<str:pin_id>", api_pins.SessionPin.as_view(), name="api-session-pin"),
    ])),
    path("compactions/<id:pk>", api_compactions.CompactionDetail.as_view(), name="api-compaction"),
    # A compaction's rollback and redo (issue 7).
    path("compactions/<id:pk>/rollback", api_rollback.CompactionRollback.as_view(), name="api-compaction-rollback"),
    path("compactions/<id:pk>/redo", api_rollback.CompactionRedo.as_view(), name="api-compaction-redo"),
    path("attempts/<id:pk>", api_compactions.AttemptDetail.as_view(), name="api-attempt"),
    # A shipper's rollout files (follow_rollouts --to URL).
    path("shipped-files/lines", api_transfer.ShippedFileLines.as_view(), name="api-shipped-file-lines"),
    path("shipped-files/offset", api_transfer.ShippedFileOffset.as_view(), name="api-shipped-file-offset"),
    # Fleet control: pause / resume / stop one simulator run or all, and the scenario library (issue 5).
    path("fleet", api_fleet.FleetList.as_view(), name="api-fleet"),
    path("fleet/<id:run_id>/<str:action>", api_fleet.FleetRunAction.as_view(), name="api-fleet-run-action"),
    path("fleet/<str:action>", api_fleet.FleetAction.as_view(), name="api-fleet-action"),
    path("scenarios", api_fleet.ScenarioList.as_view(), name="api-scenarios"),
    # Jobs: compactions, replays and imports run by workers (issue 15).
    path("jobs/<id:pk>", api_jobs.JobDetail.as_view(), name="api-job"),
    # Alerts: list, acknowledge, snooze and silence (issue 32).
    path("alerts", api_alerts.AlertList.as_view(), name="api-alerts"),
    path("alerts/<id:pk>/acknowledge", api_alerts.AlertAcknowledge.as_view(), name="api-alert-acknowledge"),
    path("alerts/silences", api_alerts.AlertSilences.as_view(), name="api-alert-silences"),
    path("alerts/silences/<id:pk>", api_alerts.AlertSilenceDetail.as_view(), name="api-alert-silence"),
    # The analytics page's figures, all time from the roll-up (issue 34).
    path("analytics", api_analytics.Analytics.as_view(), name="api-analytics"),
    # Retention's archives: list, read, restore (admin role, issue 34; docs/retention-policy.md).
    path("archives", api_archives.ArchiveList.as_view(), name="api-archives"),
    path("archives/<id:pk>", api_archives.ArchiveDetail.as_view(), name="api-archive"),
    path("archives/<id:pk>/restore", api_archives.ArchiveRestore.as_view(), name="api-archive-restore"),
]
