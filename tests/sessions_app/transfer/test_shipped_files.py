"""Shipping a Codex sessions folder from another machine (issue 30): the JSON API that takes a file's batches at
the offset the server has, and the shipper that sends them through outages and lost answers."""

from __future__ import annotations

import base64
from io import StringIO
from pathlib import Path
from unittest import mock

import httpx
import pytest
from django.core.management import call_command

from sessions_app.models import CodexSource, Session
from sessions_app.transfer import exporter
from sessions_app.transfer.shipper import Server, Shipper

ROLLOUTS = Path(__file__).resolve().parents[2] / "fixtures" / "rollouts"
LOCAL = (ROLLOUTS / "codex_0169_local_compaction.jsonl").read_bytes()
NAME = "rollout-2026-12-01T08-48-41-01a230ca-b869-7c02-b569-a052efd86504.jsonl"
FILE = "laptop/2026/12/01/" + NAME


def _batch(api, offset: int, data: bytes, file: str = FILE):
    return api.post("/api/v1/shipped-files/lines",
                    {"file": file, "name": NAME, "offset": offset, "data": base64.b64encode(data).decode()},
                    format="json")


def _exported(session_id: int) -> bytes:
    return b"".join(x.encode() for x in exporter.export_rollout(session=Session.objects.get(pk=session_id)))


@pytest.mark.django_db
def test_batches_at_the_servers_offset_build_the_file_and_a_repeated_batch_is_refused(support_api, provider, policy):
    lines = LOCAL.splitlines(keepends=True)
    first, second = b"".join(lines[:50]), b"".join(lines[50:])
    assert support_api.get("/api/v1/shipped-files/offset", {"file": FILE}).json() == {
        "file": FILE, "offset": 0, "session": None, "lines": 0}
    created = _batch(support_api, 0, first)
    assert created.status_code == 200 and created.json()["offset"] == len(first) and created.json()["lines"] == 50
    session_id = created.json()["session"]
    again = _batch(support_api, 0, first)  # its answer was lost: sent again
    assert again.status_code == 409 and again.json()["error"]["code"] == "offset_mismatch"
    assert f"send from byte {len(first)}" in again.json()["error"]["message"]
    appended = _batch(support_api, len(first), second)
    assert appended.status_code == 200 and appended.json()["offset"] == len(LOCAL)
    assert _batch(support_api, len(first), second).status_code == 409
    assert _exported(session_id) == LOCAL  # every line once, in order
    source = CodexSource.objects.get(session_id=session_id)
    assert source.followed and source.line_count == len(lines) and source.name == NAME
    assert Session.objects.get(pk=session_id).source == "followed"  # read-only, like a local follow
    assert support_api.get("/api/v1/shipped-files/offset", {"file": FILE}).json()["offset"] == len(LOCAL)


@pytest.mark.django_db
def test_shipping_needs_the_operator_role_and_complete_base64_lines(norole_api, anon_api, operator_api, provider,
                                                                   policy):
    line = LOCAL.splitlines(keepends=True)[0]
    assert _batch(anon_api, 0, line).status_code == 401
    refused = _batch(norole_api, 0, line)
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "permission_denied"
    assert norole_api.get("/api/v1/shipped-files/offset", {"file": FILE}).status_code == 403
    partial = _batch(operator_api, 0, line[:-1])
    assert partial.status_code == 400 and "complete lines" in partial.json()["error"]["message"]
    bad = operator_api.post("/api/v1/shipped-files/lines", {"file": FILE, "offset": 0, "data": "not base64!"},
                            format="json")
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid"
    late = _batch(operator_api, 10, line)
    assert late.status_code == 409 and late.json()["error"]["code"] == "offset_mismatch"
    assert CodexSource.objects.count() == 0


@pytest.mark.django_db
def test_one_users_file_keys_never_reach_another_users_files(api_client_for, make_user, provider, policy):
    first, second = api_client_for(make_user("operator")), api_client_for(make_user("operator"))
    line = LOCAL.splitlines(keepends=True)[0]
    assert _batch(first, 0, line).status_code == 200
    assert second.get("/api/v1/shipped-files/offset", {"file": FILE}).json()["offset"] == 0


class FlakyTransport(httpx.BaseTransport):
    """Forwards requests to the test server (DRF's client) and, as told, fails before a request reaches it
    (an outage) or loses the answer of one that did (the server committed, the shipper never heard)."""

    def __init__(self, api, *, outages: int, lost_answers: int) -> None:
        self.api, self.outages, self.lost_answers = api, outages, lost_answers
        self.posts = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if self.outages:
            self.outages -= 1
            raise httpx.ConnectError("connection refused", request=request)
        path = request.url.path
        if request.method == "GET":
            answer = self.api.get(path, dict(request.url.params))
        else:
            self.posts += 1
            answer = self.api.generic("POST", path, request.content, content_type="application/json")
            if self.lost_answers and self.posts % 2 == 0:
                self.lost_answers -= 1
                raise httpx.ReadTimeout("the answer was lost", request=request)
        return httpx.Response(answer.status_code, content=answer.content,
                              headers={"Content-Type": answer.get("Content-Type", "application/json")})


@pytest.mark.django_db
def test_the_shipper_loses_and_repeats_nothing_through_outages_and_lost_answers(tmp_path, support_api, provider,
                                                                              policy):
    day = tmp_path / "sessions" / "2026" / "12" / "01"
    day.mkdir(parents=True)
    path = day / NAME
    lines = LOCAL.splitlines(keepends=True)
    transport = FlakyTransport(support_api, outages=3, lost_answers=3)
    shipper = Shipper(tmp_path / "sessions", server=Server(url="http://server", token="unused", transport=transport),
                      name="laptop", batch_bytes=4096, backoff=0.0)
    path.write_bytes(b"".join(lines[:70]) + lines[70][:30])  # a half-written line waits
    first = shipper.sync(path=path)
    assert first.action == "shipped" and shipper.retries >= 4
    # The lines whose answers were lost are in too (the shipper's count is of the answers it heard).
    assert CodexSource.objects.get(session_id=first.session_id).line_count == 70
    with path.open("ab") as fh:
        fh.write(lines[70][30:] + b"".join(lines[71:]))
    assert shipper.sync(path=path).action == "shipped"
    assert CodexSource.objects.get(session_id=first.session_id).line_count == len(lines)
    # A restarted shipper knows nothing: it asks the server where the file stands.
    restarted = Shipper(tmp_path / "sessions", name="laptop", server=Server(
        url="http://server", token="unused", transport=FlakyTransport(support_api, outages=0, lost_answers=0)))
    assert restarted.sync(path=path).action == "unchanged"
    assert transport.posts > len(LOCAL) // 4096  # the bounded batches
    assert _exported(first.session_id) == LOCAL


@pytest.mark.django_db
def test_a_shipped_file_rewritten_shorter_is_followed_as_a_new_session_linked_to_the_old(tmp_path, support_api,
                                                                                         provider, policy):
    day = tmp_path / "sessions" / "2026" / "12" / "01"
    day.mkdir(parents=True)
    path = day / NAME
    lines = LOCAL.splitlines(keepends=True)
    path.write_bytes(LOCAL)
    # The rewrite's first batch loses its answer: the repeated batch must not start a third session.
    shipper = Shipper(tmp_path / "sessions", name="laptop", backoff=0.0, server=Server(
        url="http://server", token="unused", transport=FlakyTransport(support_api, outages=0, lost_answers=0)))
    old = shipper.sync(path=path)
    assert old.action == "shipped"
    rewritten = b"".join(lines[:40])
    path.write_bytes(rewritten)
    losing = FlakyTransport(support_api, outages=0, lost_answers=1)
    losing.posts = 1  # the next POST (the rewrite's first batch) is the one whose answer is lost
    shipper.client = httpx.Client(base_url="http://server", transport=losing)
    shipper.batch_bytes = 4096
    new = shipper.sync(path=path)

    assert new.session_id != old.session_id and losing.lost_answers == 0
    assert Session.objects.filter(source="followed").count() == 2
    assert _exported(new.session_id) == rewritten  # every line of the rewritten file once
    assert _exported(old.session_id) == LOCAL  # the old session keeps what it had (append-only)
    source = CodexSource.objects.get(session_id=new.session_id)
    assert source.continues_id == old.session_id and source.path.endswith(":" + FILE)
    old_source = CodexSource.objects.get(session_id=old.session_id)
    assert old_source.path == ""
    assert [(e["what"], e["action"], e["session"]) for e in old_source.events] == [
        ("rewritten", "new_session", new.session_id)]
    assert support_api.get("/api/v1/shipped-files/offset", {"file": FILE}).json() == {
        "file": FILE, "offset": len(rewritten), "session": new.session_id, "lines": 0}
    # A rewrite batch whose `replaces` is not what the server has is refused like any repeated batch.
    again = support_api.post("/api/v1/shipped-files/lines", {
        "file": FILE, "name": NAME, "offset": 0, "replaces": len(LOCAL),
        "data": base64.b64encode(lines[0]).decode()}, format="json")
    assert again.status_code == 409 and again.json()["error"]["code"] == "offset_mismatch"


@pytest.mark.django_db
def test_a_shipped_line_past_the_line_limit_is_refused_naming_it(support_api, provider, policy, settings):
    settings.COMPACTWEB_MAX_IMPORT_LINE_BYTES = 40_000
    lines = LOCAL.splitlines(keepends=True)
    assert _batch(support_api, 0, b"".join(lines[:20])).status_code == 200
    long_line = b'{"timestamp":"2026-12-01T08:49:00.000Z","type":"event_msg","payload":{"x":"' + b"x" * 50_000 + b'"}}\n'
    refused = _batch(support_api, len(b"".join(lines[:20])), long_line)
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "invalid_rollout"
    assert refused.json()["error"]["message"].startswith(
        "line 21: the line is longer than 40000 bytes (the import's line limit, COMPACTWEB_MAX_IMPORT_LINE_BYTES)")
    assert CodexSource.objects.get().line_count == 20


def _client_through(api):
    """httpx.Client as the command builds it, its requests answered by the test server."""
    real = httpx.Client

    def build(**kwargs):
        return real(**{**kwargs, "transport": FlakyTransport(api, outages=0, lost_answers=0)})

    return build


@pytest.mark.django_db
def test_a_claude_code_projects_folder_is_shipped_like_a_codex_one(tmp_path, operator_api, provider, policy):
    from tests.sessions_app.claude_transcript.transcripts import SESSION, conversation_with_two_compactions

    project = tmp_path / "projects" / "-home-dev-project"
    project.mkdir(parents=True)
    data = conversation_with_two_compactions().bytes()
    (project / f"{SESSION}.jsonl").write_bytes(data)
    out = StringIO()
    with mock.patch("sessions_app.transfer.shipper.httpx.Client", _client_through(operator_api)):
        call_command("follow_rollouts", str(tmp_path / "projects"), "--to", "http://server", "--token", "unused",
                     "--name", "ci", "--once", stdout=out)
    session = Session.objects.get(thread_id=SESSION)
    assert session.source == "followed"
    assert _exported(session.pk) == data
