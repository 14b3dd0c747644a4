from django.urls import path

from compaction_app import views

urlpatterns = [
    path("compactions/<int:pk>/", views.compaction_detail, name="compaction_detail"),
    path("analytics/", views.analytics, name="analytics"),
]
