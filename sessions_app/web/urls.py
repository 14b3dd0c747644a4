from django.contrib.auth import views as auth_views
from django.urls import path

from compactweb import converters  # noqa: F401  (registers the <id:...> path converter)
from sessions_app.web import (
    alert_views,
    audit_views,
    compaction_views,
    import_views,
    pin_views,
    replay_views,
    rollback_views,
    token_views,
    views,
    views_operator,
)

urlpatterns = [
    path("", views.fleet, name="fleet"),
    path("fleet/rows/", views.fleet_rows, name="fleet_rows"),
    path("fleet/start/", views.fleet_start, name="fleet_start"),
    # A session's pages and forms, its replay comparison (issue 7), and the operator's controls where the
    # operator is (issue 17): fault injection, recovery of a stuck session.
    path("sessions/<id:pk>/", views.session_detail, name="session_detail"),
    path("sessions/<id:pk>/live/", views.session_live, name="session_live"),
    path("sessions/<id:pk>/history/", views.session_history_page, name="session_history_page"),
    path("sessions/<id:pk>/compact/", views.compact_now, name="compact_now"),
    path("sessions/<id:pk>/run/<str:action>/", views.run_action, name="run_action"),
    path("sessions/<id:pk>/pins/", pin_views.pin_add, name="pin_add"),
    path("sessions/<id:pk>/pins/<str:pin_id>/remove/", pin_views.pin_remove, name="pin_remove"),
    path("sessions/<id:pk>/replays/", replay_views.replay_compare, name="replay_compare"),
    path("sessions/<id:pk>/faults/", views_operator.session_faults, name="session_faults"),
    path("sessions/<id:pk>/recover/", views_operator.recover_session, name="recover_session"),
    # A compaction's inspector page and its rollback / redo forms (issue 7).
    path("compactions/<id:pk>/", compaction_views.compaction_detail, name="compaction_detail"),
    path("compactions/<id:pk>/rollback/", rollback_views.compaction_rollback, name="compaction_rollback"),
    path("compactions/<id:pk>/redo/", rollback_views.compaction_redo, name="compaction_redo"),
    path("alerts/", alert_views.alerts_page, name="alerts"),
    path("alerts/<id:pk>/acknowledge/", alert_views.alert_acknowledge, name="alert_acknowledge"),
    path("alerts/silence/", alert_views.alert_silence, name="alert_silence"),
    path("alerts/silences/<id:pk>/lift/", alert_views.alert_silence_lift, name="alert_silence_lift"),
    path("analytics/", compaction_views.analytics, name="analytics"),
    # The audit log and the rollout import (issue 7).
    path("audit/", audit_views.audit_log, name="audit_log"),
    path("import/", import_views.import_rollout, name="import_rollout"),
    path("api-tokens/", token_views.api_tokens, name="api_tokens"),
    path("api-tokens/<str:token_key>/revoke/", token_views.api_token_revoke, name="api_token_revoke"),
    path("login/", auth_views.LoginView.as_view(redirect_authenticated_user=True), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
]
