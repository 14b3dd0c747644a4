"""Issue 41: a gateway session's export resumes in the Codex that made it. Its `session_meta` names what Codex's own
rollout names: the client's provider id (`openai` for the built-in provider, which alone sends a `version` header,
else the route's name), its working folder (the request's environment context), its CLI version and its Codex
session source (from the originator), for both config forms. The headers are the ones Codex 0.169 sends in each
form (captured from the real CLI): both send the remote_compaction_v2 beta header, so it decides nothing."""

from __future__ import annotations

import json

import pytest

from gateway_app.keys import do_create_gateway_key
from gateway_app.models import GatewaySession
from tests.gateway_app.conftest import call

pytestmark = pytest.mark.django_db(transaction=True)

THREAD = "0190bbbb-0000-7000-8000-0000000000e1"
CWD = "/home/alice/src/parser & loader"
BASE = {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "You are Codex."}]}
ENVIRONMENT = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": (
    f"<environment_context>\n  <cwd>{CWD}</cwd>\n  <shell>bash</shell>\n</environment_context>")}]}
PROMPT = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix parser bug 3"}]}
USER_AGENT = "codex_exec/0.169.0 (Debian 12.0.0; x86_64) xterm (codex_exec; 0.169.0)"
# What Codex 0.169 sends with every POST /responses, per config form (besides the authorization and turn metadata).
OPENAI_FORM = {"version": "0.169.0", "x-codex-beta-features": "remote_compaction_v2", "originator": "codex_exec",
               "user-agent": USER_AGENT}
CUSTOM_FORM = {"x-codex-beta-features": "remote_compaction_v2", "originator": "codex_exec", "user-agent": USER_AGENT}


def _session_meta_of_export(route, key: str, headers: dict[str, str], operator_api) -> dict:
    metadata = json.dumps({"session_id": THREAD, "thread_id": THREAD, "turn_id": "t1", "request_kind": "turn"})
    response = call("POST", f"/gateway/r/{route.name}/v1/responses", headers={
        **headers, "Authorization": f"Bearer {key}", "x-codex-turn-metadata": metadata},
        json={"model": "compactweb-sim", "stream": True, "input": [BASE, ENVIRONMENT, PROMPT]})
    assert response.status_code == 200, response.text
    session = GatewaySession.objects.get().session
    exported = operator_api.get(f"/api/v1/sessions/{session.pk}/export")
    assert exported.status_code == 200
    first = json.loads(b"".join(exported.streaming_content).splitlines()[0])
    assert first["type"] == "session_meta" and first["payload"]["id"] == THREAD
    return first["payload"]


def test_an_openai_provider_sessions_export_names_the_clients_provider_folder_version_and_source(
        sim_upstream, route, operator_api):
    key = do_create_gateway_key(route=route, client_name="alice").key
    meta = _session_meta_of_export(route, key, OPENAI_FORM, operator_api)
    assert (meta["model_provider"], meta["cwd"], meta["cli_version"], meta["source"]) == (
        "openai", CWD, "0.169.0", "exec")


def test_a_custom_provider_sessions_export_names_the_route_not_openai_though_the_beta_header_is_sent(
        sim_upstream, route, operator_api):
    key = do_create_gateway_key(route=route, client_name="alice").key
    meta = _session_meta_of_export(route, key, {**CUSTOM_FORM, "originator": "codex_cli_rs",
                                                "user-agent": USER_AGENT.replace("codex_exec", "codex_cli_rs")},
                                   operator_api)
    # Codex refuses to resume a rollout whose provider is not the configured one: the docs say to name the custom
    # provider after the route, and the version comes from the user agent when no `version` header is sent.
    assert (meta["model_provider"], meta["cwd"], meta["cli_version"], meta["source"]) == (
        route.name, CWD, "0.169.0", "cli")
