from django.urls import path

from sessions_app import api

urlpatterns = [
    path("sessions", api.SessionList.as_view(), name="api-sessions"),
    path("sessions/<int:pk>", api.SessionDetail.as_view(), name="api-session"),
    path("sessions/<int:pk>/history", api.SessionHistory.as_view(), name="api-session-history"),
    path("sessions/<int:pk>/items", api.SessionItems.as_view(), name="api-session-items"),
    path("sessions/<int:pk>/rollout", api.SessionRollout.as_view(), name="api-session-rollout"),
]
