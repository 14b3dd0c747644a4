"""One job system (issue 28): a manual compaction is a Job of kind `compaction`; the QueuedCompaction table goes.

A request still waiting in that table has no runner after this upgrade (its task, run_queued_compaction_task, no
longer exists): it is kept as a failed compaction job that says so, so the operator sees why it never ran. Then at
most one compaction job per session may be queued or running (`one_active_compaction_job`): older active ones of a
session, from before this rule, end as failed the same way.
"""

from django.conf import settings
from django.db import migrations, models


DROPPED = "the dashboard was upgraded while this compaction waited; ask again"


def _failed(now):
    return {"status": "failed", "http_status": 409, "finished_at": now,
            "result": {"error": {"code": "busy", "message": DROPPED}}}


def queued_requests_to_jobs(apps, schema_editor):
    from django.utils import timezone

    QueuedCompaction = apps.get_model("sessions_app", "QueuedCompaction")
    Job = apps.get_model("sessions_app", "Job")
    now = timezone.now()
    for queued in QueuedCompaction.objects.filter(status="queued"):
        Job.objects.create(
            kind="compaction", session_id=queued.session_id, actor_id=queued.requested_by_id,
            params={"trigger": "manual", "phase": None, "strategy": queued.strategy or None,
                    "instructions": queued.instructions, "behind": queued.behind},
            **_failed(now),
        )
    active = Job.objects.filter(kind="compaction", status__in=["queued", "running"]).order_by("-pk")
    kept = set()
    for job in active.only("pk", "session_id"):
        if job.session_id is None or job.session_id not in kept:
            kept.add(job.session_id)
            continue
        Job.objects.filter(pk=job.pk).update(**_failed(now))


class Migration(migrations.Migration):

    dependencies = [
        ('sessions_app', '0012_follow_rewrites'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RunPython(queued_requests_to_jobs, migrations.RunPython.noop),
        migrations.RemoveField(
            model_name='queuedcompaction',
            name='requested_by',
        ),
        migrations.RemoveField(
            model_name='queuedcompaction',
            name='session',
        ),
        migrations.AddConstraint(
            model_name='job',
            constraint=models.UniqueConstraint(condition=models.Q(('kind', 'compaction'), ('status__in', ['queued', 'running'])), fields=('session',), name='one_active_compaction_job'),
        ),
        migrations.DeleteModel(
            name='QueuedCompaction',
        ),
    ]
