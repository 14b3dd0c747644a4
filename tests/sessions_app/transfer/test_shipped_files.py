"""Shipping a Codex sessions folder from another machine (issue 30): the JSON API that takes a file's batches at
the offset the server has, and the shipper that sends them through outages and lost answers."""

from __future__ import annotations

import base64
from pathlib import Path

import httpx
import pytest

from sessions_app.models import CodexSource, Session
from sessions_app.transfer import exporter
from sessions_app.transfer.shipper import Shipper

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
def test_batches_at_the_servers_offset_build_the_file_and_a_repeated_batch_is_refused(operator_api, provider, policy):
    lines = LOCAL.splitlines(keepends=True)
    first, second = b"".join(lines[:50]), b"".join(lines[50:])
    assert operator_api.get("/api/v1/shipped-files/offset", {"file": FILE}).json() == {
        "file": FILE, "offset": 0, "session": None, "lines": 0}
    created = _batch(operator_api, 0, first)
    assert created.status_code == 200 and created.json()["offset"] == len(first) and created.json()["lines"] == 50
    session_id = created.json()["session"]
    again = _batch(operator_api, 0, first)  # its answer was lost: sent again
    assert again.status_code == 409 and again.json()["error"]["code"] == "offset_mismatch"
    assert f"send from byte {len(first)}" in again.json()["error"]["message"]
    appended = _batch(operator_api, len(first), second)
    assert appended.status_code == 200 and appended.json()["offset"] == len(LOCAL)
    assert _batch(operator_api, len(first), second).status_code == 409
    assert _exported(session_id) == LOCAL  # every line once, in order
    source = CodexSource.objects.get(session_id=session_id)
    assert source.followed and source.line_count == len(lines) and source.name == NAME
    assert Session.objects.get(pk=session_id).source == "followed"  # read-only, like a local follow
    assert operator_api.get("/api/v1/shipped-files/offset", {"file": FILE}).json()["offset"] == len(LOCAL)


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
def test_the_shipper_loses_and_repeats_nothing_through_outages_and_lost_answers(tmp_path, operator_api, provider,
                                                                              policy):
    day = tmp_path / "sessions" / "2026" / "12" / "01"
    day.mkdir(parents=True)
    path = day / NAME
    lines = LOCAL.splitlines(keepends=True)
    transport = FlakyTransport(operator_api, outages=3, lost_answers=3)
    shipper = Shipper(tmp_path / "sessions", url="http://server", token="unused", name="laptop", batch_bytes=4096,
                      backoff=0.0, transport=transport)
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
    restarted = Shipper(tmp_path / "sessions", url="http://server", token="unused", name="laptop",
                        transport=FlakyTransport(operator_api, outages=0, lost_answers=0))
    assert restarted.sync(path=path).action == "unchanged"
    assert transport.posts > len(LOCAL) // 4096  # the bounded batches
    assert _exported(first.session_id) == LOCAL
