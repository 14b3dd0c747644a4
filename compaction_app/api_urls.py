from django.urls import path

from compaction_app import api, api_compactions

urlpatterns = [
    path("providers", api.ProviderList.as_view(), name="api-providers"),
    path("providers/<int:pk>", api.ProviderDetail.as_view(), name="api-provider"),
    path("policies", api.PolicyList.as_view(), name="api-policies"),
    path("policies/<int:pk>", api.PolicyDetail.as_view(), name="api-policy"),
    path("compactions/<int:pk>", api_compactions.CompactionDetail.as_view(), name="api-compaction"),
    path("attempts/<int:pk>", api_compactions.AttemptDetail.as_view(), name="api-attempt"),
]

# Rollback and redo of a compaction (issue 7).
from sessions_app import api_rollback  # noqa: E402

urlpatterns += [
    path("compactions/<int:pk>/rollback", api_rollback.CompactionRollback.as_view(), name="api-compaction-rollback"),
    path("compactions/<int:pk>/redo", api_rollback.CompactionRedo.as_view(), name="api-compaction-redo"),
]
