"""Issue 41 for the Anthropic Messages gateway: a Claude Code exchange is noted as begun in the same journal as a
Codex one (gateway_app.journal), the end of its answer waits for the note and for its whole record in the note
(durable-first), its record removes the note; a note whose gateway process ended after the answer's end is
recorded whole, and one whose process ended mid-stream becomes a `cut` attempt on the Claude session, with nothing
else recorded."""

from __future__ import annotations

import json
import threading

import pytest
from django.contrib.auth.models import Group
from django.core.asgi import get_asgi_application
from django.core.management import call_command

from compactweb.roles import ROLES
from compactweb.routing import http_router
from gateway_app import anthropic_wire, journal, recorder
from gateway_app.keys import do_create_gateway_key
from gateway_app.models import GatewayAttempt, GatewayInFlight, GatewaySession
from tests.gateway_app.test_anthropic_gateway import Claude, claude_route
from tests.gateway_app.test_journal import dead_pid, serve_while_noting
from tests.gateway_app.test_recording import live

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("held_step", ["do_begin", "do_end"])
def test_the_end_of_a_claude_answer_waits_for_the_note_and_its_whole_record_and_the_record_removes_it(
        anthropic_upstream, monkeypatch, held_step):
    claude = Claude(do_create_gateway_key(route=claude_route(), client_name="alice").key)
    held, release = threading.Event(), threading.Event()
    real = getattr(journal, held_step)  # the row's insert, or its update with the answer (durable-first)
    noted: list[dict] = []

    def slow_note(**kwargs):
        noted.append(kwargs)
        held.set()
        assert release.wait(30)
        real(**kwargs)

    monkeypatch.setattr(journal, held_step, slow_note)
    app = http_router(get_asgi_application())
    claude.messages = [{"role": "user", "content": [{"type": "text", "text": "fix the parser"}]}]
    raw = json.dumps(claude.body(claude.messages)).encode()
    headers = {**claude.headers(), "content-type": "application/json"}
    path = "/gateway/anthropic/v1/messages"
    sent, before, ended_before = serve_while_noting(app, path=path, headers=headers, raw=raw, held=held,
                                                    release=release)
    (note,) = noted
    if held_step == "do_begin":
        assert note["exchange"]["endpoint"] == anthropic_wire.MESSAGES
    else:  # the whole answer, its end included, is in the row before the end goes
        assert note["status"] == 200 and b"message_stop" in note["answer"] and not note["error"]
    # The answer went on up to its ending event, which did not go to the client before the exchange was noted.
    assert b"content_block_delta" in before
    assert b"message_stop" not in before and not ended_before
    after = b"".join(m.get("body", b"") for m in sent)
    assert b"message_stop" in after and not sent[-1].get("more_body")
    assert not GatewayInFlight.objects.exists()  # the record removed the note in its own transaction
    assert not GatewayAttempt.objects.exists() and GatewaySession.objects.get().requests == 1


def test_a_claude_exchange_whose_process_ended_after_its_answer_is_recorded_whole_and_one_cut_mid_stream_is_cut(
        anthropic_upstream, monkeypatch, client, make_user):
    claude = Claude(do_create_gateway_key(route=claude_route(), client_name="alice").key)
    claude.turn("fix the parser")
    gs = GatewaySession.objects.get()
    history = list(live(gs.session))
    requests = gs.requests

    # The process is killed after the answer reached Claude Code and before the recorder wrote it: the record
    # never comes (its queue is lost with the process); the journal row, naming a process that is gone, holds
    # the whole exchange (durable-first).
    async def lost(exchange):
        pass

    with monkeypatch.context() as patched:
        patched.setattr(recorder.recorder, "put", lost)
        claude.messages.append({"role": "user", "content": [{"type": "text", "text": "and the docs"}]})
        claude.messages.append({"role": "assistant", "content": claude.ask(claude.messages)})
    (note,) = GatewayInFlight.objects.all()
    assert note.endpoint == anthropic_wire.MESSAGES and note.group_key == gs.group_key and note.ended
    GatewayInFlight.objects.filter(pk=note.pk).update(process=f"{journal.HOST}:{dead_pid()}:1")

    call_command("gateway_sweep_cut")

    assert not GatewayAttempt.objects.exists() and not GatewayInFlight.objects.exists()
    gs.refresh_from_db()
    assert gs.requests == requests + 1
    whole = list(live(gs.session))
    assert whole[:len(history)] == history and len(whole) == len(history) + 2  # its question and its answer
    assert "and the docs" in json.dumps(whole[len(history)])

    # Killed mid-stream (its answer had not ended): a cut attempt on the session, nothing of its answer invented.
    with monkeypatch.context() as patched:
        patched.setattr(recorder.recorder, "put", lost)
        claude.messages.append({"role": "user", "content": [{"type": "text", "text": "and the tests"}]})
        claude.messages.append({"role": "assistant", "content": claude.ask(claude.messages)})
    (note,) = GatewayInFlight.objects.all()
    GatewayInFlight.objects.filter(pk=note.pk).update(process=f"{journal.HOST}:{dead_pid()}:1", ended=False)

    call_command("gateway_sweep_cut")

    (cut,) = GatewayAttempt.objects.all()
    assert cut.cut and cut.status == 0 and cut.gateway_session_id == gs.pk
    assert cut.endpoint == anthropic_wire.MESSAGES and "its process is gone" in cut.error
    assert not GatewayInFlight.objects.exists()
    gs.refresh_from_db()
    assert gs.requests == requests + 2  # the cut exchange was a request the session made
    assert list(live(gs.session)) == whole  # nothing of its answer is invented

    for name in ROLES:  # (a transactional test before this one flushed the groups the migration made)
        Group.objects.get_or_create(name=name)
    client.force_login(make_user("operator"))
    page = client.get(f"/sessions/{gs.session_id}/").content.decode()
    assert 'id="gateway-cut"' in page and "1 exchange cut" in page

    # Claude Code's next request carries the whole conversation, the cut answer too: the history extends as usual.
    claude.turn("and the changelog")
    gs.refresh_from_db()
    assert not gs.session.rollout_lines.filter(kind__in=("compacted", "rollback")).exists()
    assert len(live(gs.session)) > len(whole) and not GatewayInFlight.objects.exists()
