"""Issue 44, "compaction costs after export and re-import": a Claude Code session recorded through the Anthropic
gateway keeps its compactions when exported and imported again through the JSON API, as a user moves it (`GET
/api/v1/sessions/<id>/export`, `POST /api/v1/sessions/import`): each compaction's call tokens, what it freed, its
net and the session's, and its trigger, reason and phase, Claude Code's `/compact` included. In upstream mode the
call tokens are the summary requests' usage; in compactweb mode the policy's compaction answered, and the `/compact`
is known only from the request after it (docs/gateway.md). A gateway session has no turn lines for an importer to
infer labels from: the rollout says them (`compaction_labels` lines, sessions_app/compactions/label_lines.py)."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from compaction_app.models import Compaction, CompactionPolicy
from gateway_app.keys import do_create_gateway_key
from sessions_app.models import Session
from tests.gateway_app.conftest import ANTHROPIC_UPSTREAM
from tests.gateway_app.test_anthropic_gateway import Claude, claude_route
from tests.gateway_app.test_anthropic_steering import COMPACT_COMMAND

pytestmark = pytest.mark.django_db(transaction=True)

FIGURES = ("call_tokens", "probe_tokens", "tokens_freed", "requests_after", "net_tokens")


def _compactions(api, session) -> list[dict]:
    """Each compaction of the session as the API gives it, oldest first: labels, evidence for the trigger, cost."""
    out = []
    for pk in Compaction.objects.filter(session=session).order_by("rollout_seq").values_list("pk", flat=True):
        got = api.get(f"/api/v1/compactions/{pk}").json()
        out.append({"labels": (got["trigger"], got["reason"], got["phase"]),
                    "cost": {f: got["cost"][f] for f in FIGURES}, "session_net": got["session_net"]["net_tokens"],
                    "compact_command": "/compact" in (got["inferred"] or {}).get("trigger", "")})
    return out


def _claude_code_session_with_a_compact_command(mode: str) -> tuple[Session, list[dict]]:
    """Claude Code's own compaction, then the user's /compact, then a turn, through a route of `mode`."""
    policy = CompactionPolicy.objects.create(name=f"claude-export-{mode}", strategy="local")
    route = claude_route(mode=mode, policy=policy,
                         base_url="embedded" if mode == "compactweb" else ANTHROPIC_UPSTREAM)
    claude = Claude(do_create_gateway_key(route=route, client_name="alice").key)
    # (compactweb answers the summary request itself, once; Claude Code 2.1.332 sent it twice to an upstream)
    times = 2 if mode == "upstream" else 1
    summary_calls = []

    def compact() -> None:
        claude.compact(times=times)
        summary_calls.append(sum(u["input_tokens"] + u["cache_read_input_tokens"] + u["cache_creation_input_tokens"]
                                 + u["output_tokens"] for u in claude.usages[-times:]))

    claude.turn("please fix parser bug number 3 in the notes")
    compact()  # Claude Code's automatic compaction
    claude.turn("now write the docs for the loader module")
    compact()  # the user's /compact: Claude Code records the command after the summary
    claude.messages.append({"role": "user", "content": [{"type": "text", "text": COMPACT_COMMAND}]})
    claude.turn("add a changelog entry for the parser fix")
    claude.turn("go on")
    return Session.objects.get(source="gateway"), summary_calls


@pytest.mark.parametrize("mode", ["upstream", "compactweb"])
def test_a_claude_code_gateway_sessions_compactions_keep_their_costs_and_triggers_after_export_and_re_import(
        anthropic_upstream, operator_api, support_api, mode):
    session, _ = _claude_code_session_with_a_compact_command(mode)
    original = _compactions(operator_api, session)
    assert [c["labels"][:2] for c in original] == [("auto", "context_limit"), ("manual", "user_requested")]
    assert [c["compact_command"] for c in original] == [False, True]
    assert all(c["cost"]["call_tokens"] > 0 for c in original)  # the summary requests' or the policy's call

    exported = operator_api.get(f"/api/v1/sessions/{session.pk}/export")
    assert exported.status_code == 200
    response = support_api.post("/api/v1/sessions/import", {  # its developer text: the support role imports it
        "file": SimpleUploadedFile("claude-code.jsonl", b"".join(exported.streaming_content)),
        "new_thread_id": "true"})
    assert response.status_code == 201, response.content
    copy = Session.objects.get(pk=response.json()["session"])
    assert _compactions(operator_api, copy) == original


def test_upstream_modes_call_tokens_after_re_import_are_the_summary_requests_usage(anthropic_upstream, operator_api,
                                                                                  support_api):
    """The figure that survives is the real one: what each compaction's two summary requests cost, summed."""
    session, summary_calls = _claude_code_session_with_a_compact_command("upstream")
    exported = b"".join(operator_api.get(f"/api/v1/sessions/{session.pk}/export").streaming_content)
    response = support_api.post("/api/v1/sessions/import", {
        "file": SimpleUploadedFile("claude-code.jsonl", exported), "new_thread_id": "true"})
    assert response.status_code == 201, response.content
    copy = Session.objects.get(pk=response.json()["session"])
    assert [c["cost"]["call_tokens"] for c in _compactions(operator_api, copy)] == summary_calls


def test_a_compaction_labels_line_an_importer_cannot_take_is_ignored_not_an_error(anthropic_upstream, operator_api,
                                                                                  support_api):
    """A file is anyone's: a labels line with a value outside compactweb's vocabulary (or a window that is not a
    number) labels nothing; the import succeeds and the compaction is labelled from the rollout's turns."""
    import json
    session, _ = _claude_code_session_with_a_compact_command("upstream")
    lines = b"".join(operator_api.get(f"/api/v1/sessions/{session.pk}/export").streaming_content).splitlines()
    forged = []
    for raw in lines:
        line = json.loads(raw)
        if line["payload"].get("type") == "compaction_labels":
            line["payload"].update(trigger="everything", window_number=True)
        forged.append(json.dumps(line).encode())
    response = support_api.post("/api/v1/sessions/import", {
        "file": SimpleUploadedFile("forged.jsonl", b"\n".join(forged) + b"\n"), "new_thread_id": "true"})
    assert response.status_code == 201, response.content
    copy = Session.objects.get(pk=response.json()["session"])
    assert [c["labels"][0] for c in _compactions(operator_api, copy)] == ["auto", "auto"]
