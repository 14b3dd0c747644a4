"""A running compaction is visible live: engine events are forwarded, in the order of spec §11, as transient events
of the session's group, each naming the attempt and the compaction item."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from compaction_app.models import CompactionAttempt
from sessions_app.compactions.services import do_compact_session
from sessions_app.rollout.events import session_group
from tests.channel_events import drain


@pytest.mark.django_db
def test_manual_local_compaction_publishes_its_progress_in_spec_order(make_session, items_factory):
    session = make_session(items=[items_factory.user("tidy the logging setup"), items_factory.assistant("Done.")])
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(session_group(session.pk), channel)
    result = do_compact_session(session_id=session.pk, strategy="local")
    transient = [e for e in drain(layer, channel) if e["seq"] is None]
    kinds = [e["kind"] for e in transient]
    assert kinds == [
        "compaction.started", "compaction.turn_started", "compaction.item_started",
        "compaction.raw_response_item", "compaction.token_count", "compaction.token_count",
        "compaction.item_completed", "compaction.context_compacted", "compaction.warning",
        "compaction.turn_complete",
    ]
    attempt = CompactionAttempt.objects.get(compaction=result)
    assert {(e["detail"]["attempt_id"], e["detail"]["item_id"]) for e in transient} == {(attempt.pk, result.item_id)}
    assert all(e["after_seq"] == result.rollout_seq - 1 for e in transient)
    assert transient[0]["detail"]["strategy"] == "local"
    assert [e["detail"]["source"] for e in transient if e["kind"] == "compaction.token_count"] == ["server",
                                                                                                   "estimate"]
