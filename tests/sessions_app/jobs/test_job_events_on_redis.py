"""A job's progress reaches a page that watches its session through the Redis channel layer (issue 31): the
events carry the job as the API shows it, timestamps as ISO 8601 strings. The layer packs messages with msgpack,
which has no datetime: a job view with datetimes made every send fail with TypeError (logged, then dropped)."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from asgiref.sync import async_to_sync

from compaction_app.engine.items import user_message
from sessions_app.models import Job
from sessions_app.rollout.events import session_group

KINDS = ["job.queued", "job.running", "job.finished"]


@pytest.fixture
def redis_layer(settings, redis_url):
    from channels.layers import get_channel_layer
    from channels_redis.core import RedisChannelLayer

    config = {"hosts": [redis_url], "prefix": f"test-job-events-{uuid.uuid4().hex[:8]}"}
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": config}}
    yield get_channel_layer()
    asyncio.run(RedisChannelLayer(**config).flush())  # on a layer of its own: the test's is bound to other loops


async def _job_events(layer, channel: str) -> list[dict]:
    events = []
    while len(events) < len(KINDS):
        message = await asyncio.wait_for(layer.receive(channel), timeout=10)
        if message.get("kind", "").startswith("job."):
            events.append(message)
    return events


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_a_jobs_progress_reaches_a_page_watching_through_redis(redis_layer, operator_api, make_session,
                                                               with_workers):
    session = make_session(items=[user_message("compact me"), user_message("please")])
    channel = async_to_sync(redis_layer.new_channel)()
    async_to_sync(redis_layer.group_add)(session_group(session.pk), channel)

    response = operator_api.post(f"/api/v1/sessions/{session.pk}/compact", {"strategy": "local"}, format="json")
    assert response.status_code == 202, response.content

    events = async_to_sync(_job_events)(redis_layer, channel)
    job = Job.objects.get(pk=response.json()["job"]["id"])
    assert [event["kind"] for event in events] == KINDS
    assert [event["detail"]["status"] for event in events] == ["queued", "running", "succeeded"]
    finished = events[-1]["detail"]
    assert finished["id"] == job.pk and finished["http_status"] == 201
    assert finished["created_at"] == job.created_at.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    assert isinstance(finished["finished_at"], str) and finished["finished_at"].endswith("Z")
