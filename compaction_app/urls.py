from django.urls import path

from compaction_app import pin_views, views

urlpatterns = [
    path("compactions/<int:pk>/", views.compaction_detail, name="compaction_detail"),
    path("analytics/", views.analytics, name="analytics"),
    path("sessions/<int:pk>/pins/", pin_views.pin_add, name="pin_add"),
    path("sessions/<int:pk>/pins/<str:pin_id>/remove/", pin_views.pin_remove, name="pin_remove"),
]
