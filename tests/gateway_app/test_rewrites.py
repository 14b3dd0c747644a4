"""Issue 41: a history that does not extend the recorded one and that no compaction explains is recorded as the
client's rewrite (a `rollback` line with source `client_rewrite`), never as a compaction; a retry of the same
request is one exchange; a request recorded after a later one of its session changes nothing."""

from __future__ import annotations

import pytest

from compaction_app.models import Compaction
from gateway_app import recording
from gateway_app.keys import do_create_gateway_key
from tests.gateway_app.test_recording import Codex, gateway_session, live, user, wire

pytestmark = pytest.mark.django_db(transaction=True)


def _lines(session, kind):
    return list(session.rollout_lines.filter(kind=kind).order_by("seq").values_list("payload", flat=True))


def test_a_history_the_client_rewrote_is_recorded_as_a_rewrite_not_a_compaction(sim_upstream, route):
    codex = Codex(do_create_gateway_key(route=route, client_name="alice").key)
    codex.turn("please fix parser bug 3")
    codex.turn()
    codex.history = [user("actually, fix parser bug 4")]  # the user edited the conversation from its start
    codex.turn()
    session = gateway_session()
    assert not _lines(session, "compacted")
    assert not Compaction.objects.filter(session=session).exists()  # nothing for a storm alert to count
    (rewrite,) = _lines(session, "rollback")
    assert rewrite["source"] == recording.CLIENT_REWRITE and rewrite["kept_count"] == 0
    assert live(session) == [wire(i) for i in codex.history[:len(live(session))]]


def test_a_retry_of_the_same_request_is_one_exchange(sim_upstream, route):
    codex = Codex(do_create_gateway_key(route=route, client_name="alice").key)
    codex.history.append(user("please fix parser bug 3"))
    sent = list(codex.history)
    assert codex.post(sent).status_code == 200
    assert codex.post(sent).status_code == 200  # Codex retried: it did not take the first answer
    session = gateway_session()
    recorded = live(session)
    assert recorded[:1] == [wire(i) for i in sent]
    calls = [i for i in recorded if i.get("type") == "function_call"]
    assert len(calls) == 1 and recorded[-1] == calls[0]  # one answer in the record, the retry's
    assert not _lines(session, "compacted") and not Compaction.objects.filter(session=session).exists()


def test_a_request_recorded_after_a_later_one_changes_nothing(sim_upstream, route):
    codex = Codex(do_create_gateway_key(route=route, client_name="alice").key)
    codex.turn("please fix parser bug 3")
    earlier = list(codex.history[:1])
    codex.turn("now the docs")
    session = gateway_session()
    before = live(session)
    # The first request again, as a process that took it would record it late: its history is a prefix of the
    # record, with the client's later input after it.
    assert codex.post(earlier).status_code == 200
    assert live(session) == before
    assert not _lines(session, "compacted") and not _lines(session, "rollback")
