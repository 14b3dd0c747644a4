"""Followed, imported, Claude Code and gateway sessions are not shown as simulated ones (issue 47 item 8): each
kind's title says how it came, a followed file's line count moves with the file on the live page, only a session
the simulator drives has a "Simulated run" card, a Claude Code transcript is measured against its model's window
and its compactions are told in Claude Code's words, and imports and scenario windows add no provider row to the
pages' provider lists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from channels.db import database_sync_to_async
from django.core.files.uploadedfile import SimpleUploadedFile

from compaction_app.models import Compaction, Provider
from sessions_app.models import Session
from sessions_app.transfer.follow import sync_file
from tests.sessions_app.claude_transcript.transcripts import SESSION, conversation_with_two_compactions

ROLLOUTS = Path(__file__).resolve().parents[1] / "fixtures" / "rollouts"
LOCAL = (ROLLOUTS / "codex_0169_local_compaction.jsonl").read_bytes()
NAME = "rollout-2026-12-01T08-48-41-01a230ca-b869-7c02-b569-a052efd86504.jsonl"
LINES = re.compile(r'<span id="codex-file-lines" data-lines="(\d+)"( hx-swap-oob="true")?>')


def _import_claude(api):
    data = conversation_with_two_compactions().bytes()
    response = api.post("/api/v1/sessions/import", {"file": SimpleUploadedFile(f"{SESSION}.jsonl", data)})
    assert response.status_code == 201, response.content
    return response.json()["session"]


def _follow(tmp_path, data: bytes) -> Path:
    day = tmp_path / "sessions" / "2026" / "12" / "01"
    day.mkdir(parents=True, exist_ok=True)
    path = day / NAME
    with path.open("ab") as fh:
        fh.write(data)
    return path


@pytest.mark.django_db
def test_a_followed_file_is_titled_followed_and_an_upload_imported(tmp_path, client, operator_user, support_api,
                                                                  provider, policy):
    path = _follow(tmp_path, LOCAL)
    followed = Session.objects.get(pk=sync_file(path=path).session_id)
    uploaded = support_api.post("/api/v1/sessions/import", {  # its developer text needs the support role
        "file": SimpleUploadedFile(NAME, LOCAL), "new_thread_id": "true"}).json()["session"]
    listed = {s["id"]: s["title"] for s in support_api.get("/api/v1/sessions").json()}
    assert listed[followed.pk].startswith("followed: ") and listed[uploaded].startswith("imported: ")
    client.force_login(operator_user)
    assert ">followed: " in client.get(f"/sessions/{followed.pk}/").content.decode()


@pytest.mark.django_db
def test_only_a_session_the_simulator_drives_has_a_simulated_run_card(client, operator_user, operator_api, provider,
                                                                      policy, make_session):
    started = operator_api.post("/api/v1/fleet", {"scenario": "fix-failing-test", "count": 1, "provider": provider.pk,
                                                  "policy": policy.pk}, format="json").json()["runs"][0]["session"]
    claude = _import_claude(operator_api)
    native = make_session(title="made over the API").pk
    client.force_login(operator_user)
    pages = {pk: client.get(f"/sessions/{pk}/").content.decode() for pk in (started, claude, native)}
    assert "Simulated run" in pages[started] and ">Pause</button>" in pages[started]
    for pk in (claude, native):
        assert "Simulated run" not in pages[pk] and '<section id="run-controls" hidden' in pages[pk]


def _gateway_session(provider, policy):
    from gateway_app.keys import do_create_gateway_key
    from gateway_app.models import GatewayRoute, GatewaySession
    from gateway_app.recording import GATEWAY_SOURCE, ORIGINATOR
    from sessions_app.rollout.services import ClientOrigin, do_create_session

    route = GatewayRoute.objects.create(name="team", provider=provider, policy=policy)
    key = do_create_gateway_key(route=route, client_name="alice-laptop")
    session = do_create_session(title="alice-laptop via team", provider=provider, policy=policy,
                                origin=ClientOrigin(source=GATEWAY_SOURCE, originator=ORIGINATOR,
                                                    model_provider="team"))
    GatewaySession.objects.create(session=session, route=route, key=key.row, client_name="alice-laptop",
                                  group_key=f"thread:{session.thread_id}")
    return session


FAULT_PANEL = "<h2>Fault injection</h2>"


@pytest.mark.django_db
def test_only_a_session_whose_requests_reach_the_simulated_model_has_a_fault_panel(
        tmp_path, client, operator_user, operator_api, provider, policy, make_session):
    # The panel's faults ride on the requests a session sends to the simulated model: a followed file sends none, a
    # gateway session's go to its client's upstream, a real provider ignores them.
    started = operator_api.post("/api/v1/fleet", {"scenario": "fix-failing-test", "count": 1, "provider": provider.pk,
                                                  "policy": policy.pk}, format="json").json()["runs"][0]["session"]
    native = make_session(title="made over the API").pk
    followed = sync_file(path=_follow(tmp_path, LOCAL)).session_id
    gateway = _gateway_session(provider, policy).pk
    real = Provider.objects.create(name="real", base_url="https://models.example.test/v1", model="gpt-x",
                                   context_window=32000)
    on_real = make_session(title="on a real provider", provider=real).pk
    client.force_login(operator_user)
    pages = {pk: client.get(f"/sessions/{pk}/").content.decode() for pk in (started, native, followed, gateway, on_real)}
    for pk in (started, native):
        assert FAULT_PANEL in pages[pk] and 'id="fault-form"' in pages[pk]
    for pk in (followed, gateway, on_real):
        assert FAULT_PANEL not in pages[pk] and 'id="fault-form"' not in pages[pk], pk
    # A post from an older page (or by hand) sets no fault the session would never fire.
    refused = client.post(f"/sessions/{gateway}/faults/", {"fault": "overloaded"}, HTTP_HX_REQUEST="true")
    assert refused.status_code == 409 and "simulated model" in refused.content.decode()
    assert Session.objects.get(pk=gateway).fault_injection == {}


@pytest.mark.django_db
def test_a_claude_transcript_is_charted_against_its_models_window(client, operator_user, operator_api, provider,
                                                                  policy):
    session = _import_claude(operator_api)
    detail = operator_api.get(f"/api/v1/sessions/{session}").json()
    assert detail["context_window"] == 200_000  # claude-sonnet-4-5's, not the chosen provider's 32,000
    assert detail["auto_compact_limit"] > 32_000
    client.force_login(operator_user)
    page = client.get(f"/sessions/{session}/").content.decode()
    limits = {int(x) for x in re.findall(r'class="chart__limit"[^>]*data-limit="(\d+)"', page)}
    assert limits == {detail["auto_compact_limit"]}


@pytest.mark.django_db
def test_a_claude_compaction_is_described_in_claude_code_terms(client, operator_user, operator_api, provider, policy):
    session = _import_claude(operator_api)
    auto, manual = Compaction.objects.filter(session_id=session).order_by("rollout_seq")
    client.force_login(operator_user)
    page = client.get(f"/compactions/{auto.pk}/").content.decode()
    assert 'id="claude-badge"' in page and "auto-compact, near the context limit" in page
    assert "model request of its own" in page and "Claude Code's own compaction prompt" in page
    assert "Codex strategy" not in page and "Injection" not in page and "labels inferred from the transcript" in page
    # How its labels were read names the transcript, not Codex's rollout; Claude Code's count has separators.
    assert "Inferred from the transcript" in page and "Codex does not record" not in page
    pre_tokens = auto.inferred["pre_tokens"]
    assert re.fullmatch(r"Claude Code counted \d{1,3}(,\d{3})+ tokens before compacting", pre_tokens), pre_tokens
    assert "/compact, asked for by the user" in client.get(f"/compactions/{manual.pk}/").content.decode()
    codex = _follow_and_first_compaction()
    codex_page = client.get(f"/compactions/{codex}/").content.decode()
    assert "Codex strategy" in codex_page and "Codex does not record these labels" in codex_page


def _follow_and_first_compaction() -> int:
    from sessions_app.transfer import importer

    result = importer.do_import_rollout(lines=LOCAL.splitlines(keepends=True), new_thread_id=True)
    return Compaction.objects.filter(session=result.session).first().pk


@pytest.mark.django_db
def test_imports_and_scenario_windows_add_no_provider_to_the_pages_lists(client, operator_user, operator_api,
                                                                        support_api, provider, policy):
    _import_claude(operator_api)  # claude-sonnet-4-5's window
    assert support_api.post("/api/v1/sessions/import", {  # Codex's 8,550 window
        "file": SimpleUploadedFile(NAME, LOCAL)}).status_code == 201
    for window in (40_000, 40_000, 50_000):  # scenario windows
        assert operator_api.post("/api/v1/fleet", {
            "scenario": "fix-failing-test", "count": 1, "provider": provider.pk, "policy": policy.pk,
            "context_window": window}, format="json").status_code == 201
    derived = Provider.objects.exclude(pk=provider.pk)
    assert derived.count() == 4 and all(p.derived_from_id == provider.pk for p in derived)  # reused, not one a run
    client.force_login(operator_user)
    for url in ("/", "/import/", f"/sessions/{Session.objects.first().pk}/replays/"):
        page = client.get(url).content.decode()
        form = page.split('id="start-form"')[1] if url == "/" else page
        offered = re.findall(r'<select name="provider"[^>]*>(.*?)</select>', form, re.S)[0]
        assert re.findall(r'<option value="(\d+)"', offered) == [str(provider.pk)], url
    # The fleet's filter still names the rows sessions run on, so a filter can find them.
    assert all(f'<option value="{p.pk}"' in client.get("/").content.decode() for p in derived)




@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_a_followed_files_line_count_moves_on_the_live_page(tmp_path, ws_for, operator_user, provider, policy,
                                                                 client):
    lines = LOCAL.splitlines(keepends=True)
    path = _follow(tmp_path, b"".join(lines[:40]))
    session_id = (await database_sync_to_async(sync_file)(path=path)).session_id
    comm = await ws_for(operator_user, f"/ws/sessions/{session_id}/")
    ok, _ = await comm.connect(timeout=10)
    assert ok
    await comm.receive_output(10)  # hello
    _follow(tmp_path, b"".join(lines[40:]))
    await database_sync_to_async(sync_file)(path=path)
    seen = ""
    while f'data-lines="{len(lines)}"' not in seen:
        message = await comm.receive_output(10)
        seen += message.get("text", "")
    found = LINES.findall(seen)
    assert found and found[-1] == (str(len(lines)), ' hx-swap-oob="true"')
    await comm.disconnect()
    # The page's first render and its HTTP re-sync say the same.
    await database_sync_to_async(client.force_login)(operator_user)
    page = (await database_sync_to_async(client.get)(f"/sessions/{session_id}/")).content.decode()
    resync = (await database_sync_to_async(client.get)(f"/sessions/{session_id}/live/")).content.decode()
    assert f'data-lines="{len(lines)}"' in page and f'data-lines="{len(lines)}"' in resync
