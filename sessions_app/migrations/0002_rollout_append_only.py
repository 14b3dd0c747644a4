"""Database triggers refusing UPDATE and DELETE on rollout lines (SQLite and PostgreSQL; see rollout_guard).

SQLite drops a table's triggers when a migration rebuilds the table: a later migration that alters
sessions_app_rolloutline must run rollout_guard.install_triggers again.
"""

from django.db import migrations

from sessions_app.rollout_guard import install_first_triggers, remove_triggers


class Migration(migrations.Migration):
    dependencies = [("sessions_app", "0001_initial")]

    operations = [migrations.RunPython(install_first_triggers, remove_triggers)]
