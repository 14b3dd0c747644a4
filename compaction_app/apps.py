from django.apps import AppConfig


class CompactionAppConfig(AppConfig):
    name = "compaction_app"
    verbose_name = "Compaction"
