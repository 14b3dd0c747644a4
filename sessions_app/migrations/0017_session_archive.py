"""Retention (issue 34): the archive runs and the record of each archived session; the rollout's triggers again
(they now let an archived session's lines be deleted, sessions_app.rollout_guard) and, on PostgreSQL, the
SECURITY DEFINER function that is the only way the application's role deletes them."""

import django.db.models.deletion
from django.db import migrations, models

from sessions_app.rollout_guard import (
    install_delete_function,
    install_triggers,
    remove_delete_function,
)


class Migration(migrations.Migration):

    dependencies = [
        ('sessions_app', '0016_rollout_pin_events'),
    ]

    operations = [
        migrations.CreateModel(
            name='ArchiveRun',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('started_at', models.DateTimeField()),
                ('finished_at', models.DateTimeField(blank=True, null=True)),
                ('trigger', models.CharField(help_text='scheduler, command, or who ran it.', max_length=32)),
                ('dry_run', models.BooleanField(default=False)),
                ('cutoff', models.DateTimeField(help_text='Sessions with no activity since this time were due.')),
                ('due', models.PositiveIntegerField(default=0, help_text="Sessions due in this run (at most the run's limit).")),
                ('archived', models.PositiveIntegerField(default=0)),
                ('failed', models.PositiveIntegerField(default=0)),
                ('detail', models.JSONField(blank=True, default=dict, help_text="The sessions archived (or due, in a dry run) and each failure's reason.")),
            ],
            options={
                'ordering': ['-started_at', '-pk'],
            },
        ),
        migrations.CreateModel(
            name='SessionArchive',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('session_id', models.PositiveBigIntegerField(help_text="The archived (removed) session's id.", unique=True)),
                ('thread_id', models.UUIDField(db_index=True)),
                ('title', models.CharField(max_length=200)),
                ('source', models.CharField(max_length=16)),
                ('provider_id', models.PositiveBigIntegerField(blank=True, null=True)),
                ('policy_id', models.PositiveBigIntegerField(blank=True, null=True)),
                ('session_created_at', models.DateTimeField()),
                ('last_activity_at', models.DateTimeField(help_text="The session's last change before it was archived.")),
                ('file_name', models.CharField(help_text='Path of the .jsonl.gz file under the archive folder.', max_length=300)),
                ('export_name', models.CharField(help_text="The export's file name (a restore imports it as this).", max_length=255)),
                ('sha256', models.CharField(help_text="SHA-256 of the decompressed file (the export's bytes).", max_length=64)),
                ('file_lines', models.PositiveIntegerField(help_text='Lines in the decompressed file.')),
                ('export_bytes', models.PositiveBigIntegerField(help_text='Size of the decompressed file.')),
                ('compressed_bytes', models.PositiveBigIntegerField()),
                ('rollout_lines', models.PositiveBigIntegerField(help_text='Rollout rows the session had (all of them removed).')),
                ('last_seq', models.PositiveBigIntegerField()),
                ('archived_at', models.DateTimeField()),
                ('archived_by', models.CharField(help_text='scheduler, command, or the user who ran it.', max_length=150)),
                ('run', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='archives', to='sessions_app.archiverun')),
            ],
            options={
                'ordering': ['-archived_at', '-pk'],
            },
        ),
        migrations.RunPython(install_triggers, migrations.RunPython.noop),
        migrations.RunPython(install_delete_function, remove_delete_function),
    ]
