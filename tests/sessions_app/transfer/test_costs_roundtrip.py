"""Costs that survive (issue 46): a compaction's call tokens and its probes' tokens are rollout lines, read back by
import (and follow, which imports through the same path), so a session's net is the same after export and
re-import through the API."""

from __future__ import annotations

import json
import uuid

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from compaction_app.engine.items import user_message
from compaction_app.models import Compaction, CompactionPolicy
from sessions_app.models import RolloutLine, Session
from sessions_app.turns.services import run_turn
from tests.compaction_app.engine.fakes import FakeClient, assistant, completed, done

pytestmark = pytest.mark.django_db

ITEMS = [
    user_message("Fix the ledger in src/ledger.py; money must stay Decimal"),
    {"type": "function_call", "call_id": "c1", "name": "read_file", "arguments": json.dumps({"path": "src/ledger.py"})},
    {"type": "function_call_output", "call_id": "c1", "output": "def ledger():\n    pass\n" * 80},
    user_message("now fix it"),
]


@pytest.fixture(autouse=True)
def _fast(no_engine_sleeps):
    """Retries wait no real time."""


def test_a_sessions_net_call_and_probe_tokens_are_the_same_after_export_and_re_import(
        operator_api, support_api, make_session, policy, django_capture_on_commit_callbacks):
    CompactionPolicy.objects.filter(pk=policy.pk).update(retention_probes=True)
    session = make_session(items=ITEMS)
    made = operator_api.post(f"/api/v1/sessions/{session.pk}/compact", {"strategy": "local"}, format="json").json()
    for n in range(3):  # requests that follow the compaction: what its freed tokens saved
        client = FakeClient(streams=[[done(assistant(f"answer {n}")), completed(300 + n, 10)]])
        assert run_turn(session_id=session.pk, user_input=f"go on {n}", client=client).ok
    original = operator_api.get(f"/api/v1/compactions/{made['id']}").json()
    assert original["cost"]["call_tokens"] > 0 and original["cost"]["probe_tokens"] > 0
    assert original["cost"]["requests_after"] == 3
    probe_line = RolloutLine.objects.get(session=session, payload__type="retention_probe_usage")
    assert probe_line.payload["info"]["last_token_usage"]["total_tokens"] == original["cost"]["probe_tokens"]

    exported = b"".join(operator_api.get(f"/api/v1/sessions/{session.pk}/export").streaming_content)
    with django_capture_on_commit_callbacks(execute=True):  # its developer text: the support role imports it
        response = support_api.post("/api/v1/sessions/import", {
            "file": SimpleUploadedFile("rollout.jsonl", exported), "new_thread_id": "true"})
    assert response.status_code == 201, response.content
    copy = Session.objects.get(pk=response.json()["session"])
    (imported,) = Compaction.objects.filter(session=copy)
    again = operator_api.get(f"/api/v1/compactions/{imported.pk}").json()
    for figure in ("call_tokens", "probe_tokens", "tokens_freed", "requests_after", "net_tokens"):
        assert again["cost"][figure] == original["cost"][figure], figure
    assert again["session_net"]["net_tokens"] == original["session_net"]["net_tokens"] != 0


def test_a_followed_file_gives_its_compactions_their_call_and_probe_tokens(
        operator_api, make_session, policy, tmp_path, django_capture_on_commit_callbacks):
    from sessions_app.transfer.follow import sync_file

    CompactionPolicy.objects.filter(pk=policy.pk).update(retention_probes=True)
    session = make_session(items=ITEMS)
    made = operator_api.post(f"/api/v1/sessions/{session.pk}/compact", {"strategy": "local"}, format="json").json()
    exported = b"".join(operator_api.get(f"/api/v1/sessions/{session.pk}/export").streaming_content)
    first, rest = exported.split(b"\n", 1)
    meta = json.loads(first)
    meta["payload"]["id"] = str(uuid.uuid4())  # another thread: the followed copy is a session of its own
    path = tmp_path / "sessions" / "2026" / "12" / "07" / f"rollout-2026-12-07T05-00-00-{meta['payload']['id']}.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(json.dumps(meta).encode() + b"\n" + rest)
    with django_capture_on_commit_callbacks(execute=True):
        result = sync_file(path=path)
    (followed,) = Compaction.objects.filter(session_id=result.session_id)
    assert (followed.call_tokens, followed.probe_tokens) == (made["cost"]["call_tokens"], made["cost"]["probe_tokens"])
    assert followed.probe_tokens > 0


def test_a_codex_rollout_without_usage_lines_imports_its_compactions_at_no_cost(
        support_api, rollout_bytes, provider, policy, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):  # Codex's developer message: the support role's import
        response = support_api.post("/api/v1/sessions/import", {
            "file": SimpleUploadedFile("codex.jsonl", rollout_bytes("codex_0169_local_compaction.jsonl"))})
    assert response.status_code == 201, response.content
    rows = Compaction.objects.filter(session_id=response.json()["session"])
    assert rows.exists() and all(c.call_tokens == 0 and c.probe_tokens == 0 for c in rows)


def test_usage_lines_read_after_their_compaction_are_given_to_it(
        operator_api, make_session, policy, tmp_path, django_capture_on_commit_callbacks):
    """The follower read the file between Codex's two writes: the `compacted` line in one read, its usage lines in
    the next. The compaction gets them then, once (a third read of more lines adds nothing)."""
    from sessions_app.transfer.follow import sync_file

    CompactionPolicy.objects.filter(pk=policy.pk).update(retention_probes=True)
    session = make_session(items=ITEMS)
    made = operator_api.post(f"/api/v1/sessions/{session.pk}/compact", {"strategy": "local"}, format="json").json()
    client = FakeClient(streams=[[done(assistant("answer")), completed(300, 10)]])
    assert run_turn(session_id=session.pk, user_input="go on", client=client).ok
    exported = b"".join(operator_api.get(f"/api/v1/sessions/{session.pk}/export").streaming_content)
    lines = exported.splitlines(keepends=True)
    meta = json.loads(lines[0])
    meta["payload"]["id"] = str(uuid.uuid4())
    lines[0] = json.dumps(meta).encode() + b"\n"
    first_usage = next(i for i, line in enumerate(lines) if b'"compaction_usage"' in line)
    assert any(b'"type": "compacted"' in x or b'"type":"compacted"' in x for x in lines[:first_usage])
    path = tmp_path / "sessions" / f"rollout-2026-12-07T05-00-00-{meta['payload']['id']}.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"".join(lines[:first_usage]))
    with django_capture_on_commit_callbacks(execute=True):
        result = sync_file(path=path)
    (followed,) = Compaction.objects.filter(session_id=result.session_id)
    assert (followed.call_tokens, followed.probe_tokens) == (0, 0)  # not read yet
    with path.open("ab") as f:
        f.write(b"".join(lines[first_usage:first_usage + 2]))
    with django_capture_on_commit_callbacks(execute=True):
        assert sync_file(path=path).action == "appended"
    with path.open("ab") as f:
        f.write(b"".join(lines[first_usage + 2:]))
    with django_capture_on_commit_callbacks(execute=True):
        sync_file(path=path)
    followed.refresh_from_db()
    assert (followed.call_tokens, followed.probe_tokens) == (made["cost"]["call_tokens"], made["cost"]["probe_tokens"])
    assert followed.probe_tokens > 0


def _reread_session(make_session, operator_api):
    """A session whose compaction dropped src/ledger.py, and a turn that read it again: a re-read tax."""
    import random

    from compaction_app.models import AlertSettings
    from sessions_app.simulator import load_scenario
    from sessions_app.simulator.tools import answer_tool_call
    from sessions_app.turns.services import TurnScript

    row = AlertSettings.current()
    row.reread_min_calls, row.reread_turns = 1, 3
    row.save()
    read = {"type": "function_call", "call_id": "c1", "name": "read_file",
            "arguments": json.dumps({"path": "src/ledger.py"})}
    tools = load_scenario("fix-failing-test").build_tools(seed=1)
    first, _ = answer_tool_call(read, tools, random.Random(1))
    session = make_session(items=[user_message("look at src/ledger.py"), read, first, user_message("now fix it")])
    made = operator_api.post(f"/api/v1/sessions/{session.pk}/compact", {"strategy": "local"}, format="json").json()
    again = {**read, "call_id": "r1"}
    client = FakeClient(streams=[[done(again), completed(500, 20)], [done(assistant("read it again")),
                                                                      completed(900, 10)]])
    assert run_turn(session_id=session.pk, user_input="what was in that file?", script=TurnScript(tools=tools),
                    client=client).ok
    original = operator_api.get(f"/api/v1/compactions/{made['id']}").json()
    assert original["cost"]["reread_tokens"] > 0
    return session, original


def test_the_re_read_tax_is_a_rollout_line_and_survives_export_and_re_import(
        operator_api, support_api, make_session, policy, django_capture_on_commit_callbacks):
    session, original = _reread_session(make_session, operator_api)
    (line,) = RolloutLine.objects.filter(session=session, payload__type="compaction_reread_usage")
    assert line.payload["info"]["last_token_usage"]["total_tokens"] == original["cost"]["reread_tokens"]
    exported = b"".join(operator_api.get(f"/api/v1/sessions/{session.pk}/export").streaming_content)
    with django_capture_on_commit_callbacks(execute=True):
        response = support_api.post("/api/v1/sessions/import", {
            "file": SimpleUploadedFile("rollout.jsonl", exported), "new_thread_id": "true"})
    assert response.status_code == 201, response.content
    (imported,) = Compaction.objects.filter(session_id=response.json()["session"])
    again = operator_api.get(f"/api/v1/compactions/{imported.pk}").json()
    for figure in ("reread_tokens", "call_tokens", "net_tokens"):
        assert again["cost"][figure] == original["cost"][figure], figure


def test_a_follower_reads_the_re_read_tax_when_it_arrives_after_the_compaction(
        operator_api, make_session, policy, tmp_path, django_capture_on_commit_callbacks):
    from sessions_app.transfer.follow import sync_file

    session, original = _reread_session(make_session, operator_api)
    exported = b"".join(operator_api.get(f"/api/v1/sessions/{session.pk}/export").streaming_content)
    lines = exported.splitlines(keepends=True)
    meta = json.loads(lines[0])
    meta["payload"]["id"] = str(uuid.uuid4())
    lines[0] = json.dumps(meta).encode() + b"\n"
    at = next(i for i, line in enumerate(lines) if b"compaction_reread_usage" in line)
    path = tmp_path / "sessions" / f"rollout-2026-12-07T05-00-00-{meta['payload']['id']}.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"".join(lines[:at]))
    with django_capture_on_commit_callbacks(execute=True):
        result = sync_file(path=path)
    (followed,) = Compaction.objects.filter(session_id=result.session_id)
    assert followed.reread_tokens == 0
    with path.open("ab") as f:
        f.write(b"".join(lines[at:]))
    with django_capture_on_commit_callbacks(execute=True):
        assert sync_file(path=path).action == "appended"
    followed.refresh_from_db()
    assert followed.reread_tokens == original["cost"]["reread_tokens"]
    # A followed session's rollout is the file's: the follower's own watch writes no re-read line into it.
    assert RolloutLine.objects.filter(session_id=result.session_id,
                                      payload__type="compaction_reread_usage").count() == 1
