"""Issue 41, "no record lost": every exchange the gateway forwards is noted as begun, and its whole record is in
the note, before its answer ends (durable-first); its record removes the note; a note whose gateway process ended
mid-stream becomes a `cut` attempt, visible on the session's page, with nothing else recorded, and one whose
answer had ended is recorded whole. (The process really killed, and really stopped: tests/scale_out/
test_gateway_records_on_daphne.py.)"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import subprocess
import sys
import threading
import uuid

import httpx
import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import Group
from django.core.asgi import get_asgi_application
from django.core.management import call_command
from django.utils import timezone

from compactweb.roles import ROLES
from compactweb.routing import http_router
from gateway_app import journal, keys, proxy, recorder, recording
from gateway_app.models import GatewayAttempt, GatewayInFlight, GatewaySession
from sessions_app.models import LiveItem
from tests.compactweb.test_deployment_settings import _run
from tests.gateway_app.conftest import call, logged_by, make_route
from tests.gateway_app.test_proxy import BASE, bearer, meta, user

pytestmark = pytest.mark.django_db(transaction=True)

THREAD = "0190eeee-0000-7000-8000-000000000001"


def turn(key: str, items: list[dict], turn_id: str = "turn-1") -> httpx.Response:
    body = {"model": "compactweb-sim", "stream": True, "input": [BASE, *items]}
    return call("POST", "/gateway/v1/responses", json=body, headers={**bearer(key), **meta(THREAD, turn_id)})


def serve_while_noting(app, *, path: str, headers: dict[str, str], raw: bytes, held: threading.Event,
                       release: threading.Event) -> tuple[list[dict], bytes, bool]:
    """One request served by `app` with a client that stays, while a journal step is held (`held` set by the
    step, `release` lets it go): (every message the server handed over, the body handed over while held, whether
    the answer had ended by then)."""
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
             "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 80),
             "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()]}
    sent: list[dict] = []  # what the server would write to the client's socket, as it is handed over

    async def go():
        requests = [{"type": "http.request", "body": raw, "more_body": False}]

        async def receive():
            if requests:
                return requests.pop()
            return await asyncio.get_running_loop().create_future()  # the client stays

        async def send(message):
            sent.append(message)

        served = asyncio.ensure_future(app(scope, receive, send))
        assert await asyncio.to_thread(held.wait, 30)
        await asyncio.sleep(0.5)  # the upstream's whole answer has long arrived
        body = b"".join(m.get("body", b"") for m in sent)
        ended = any(m["type"] == "http.response.body" and not m.get("more_body") for m in sent)
        release.set()
        await served
        await proxy.drain()
        return body, ended

    before, ended = async_to_sync(go)()
    return sent, before, ended


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


@pytest.fixture
def running_process():
    """A process of this host that runs (the test's own child, not its parent: a sweep that signalled it would
    take down whatever runs the tests)."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    yield child
    child.kill()
    child.wait()


@pytest.mark.parametrize("stream", [True, False], ids=["sse", "json"])
@pytest.mark.parametrize("held_step", ["do_begin", "do_end"])
def test_the_end_of_an_answer_waits_for_the_note_and_its_whole_record_and_the_record_removes_the_note(
        sim_upstream, gateway_key, monkeypatch, held_step, stream):
    held, release = threading.Event(), threading.Event()
    real = getattr(journal, held_step)  # the row's insert, or its update with the answer (durable-first)

    def slow_note(**kwargs):
        held.set()
        assert release.wait(30)
        real(**kwargs)

    monkeypatch.setattr(journal, held_step, slow_note)
    app = http_router(get_asgi_application())
    raw = json.dumps({"model": "compactweb-sim", "stream": stream, "input": [BASE, user("hello")]}).encode()
    headers = {**bearer(gateway_key), **meta(THREAD), "content-type": "application/json"}
    sent, before, ended_before = serve_while_noting(app, path="/gateway/v1/responses", headers=headers, raw=raw,
                                                    held=held, release=release)
    after = b"".join(m.get("body", b"") for m in sent)
    assert not ended_before and not sent[-1].get("more_body")
    if stream:
        # The answer (the simulated model sends it in one piece) went on up to its ending event, which did not go
        # to the client before the exchange was noted and its whole record was in the note.
        assert b"response.output_item.done" in before
        assert b"response.completed" not in before
        assert b"response.completed" in after
    else:  # a JSON answer: its last chunk is its end, held the same way
        with pytest.raises(ValueError):
            json.loads(before)
        assert json.loads(after)["status"] == "completed"
    assert not GatewayInFlight.objects.exists()  # the record removed the note in its own transaction
    assert not GatewayAttempt.objects.exists() and GatewaySession.objects.get().requests == 1


def test_an_exchange_whose_process_ended_is_recorded_as_cut_and_nothing_is_invented(sim_upstream, gateway_key,
                                                                                      client, make_user,
                                                                                      running_process):
    assert turn(gateway_key, [user("fix the parser")]).status_code == 200
    gs = GatewaySession.objects.get()
    history = list(LiveItem.objects.filter(session_id=gs.session_id).values_list("item", flat=True))
    # Three exchanges begun and never recorded: one by a process of this host that is gone, one by a process of
    # this host that still runs (a child of this test), one by a process on another host, not yet old.
    common = dict(route_id=gs.route_id, key_id=gs.key_id, group_key=gs.group_key, endpoint="responses",
                  request_kind="turn", begun=timezone.now())
    gone = GatewayInFlight.objects.create(token=uuid.uuid4(), process=f"{journal.HOST}:{dead_pid()}:1", **common)
    running = GatewayInFlight.objects.create(token=uuid.uuid4(), process=f"{journal.HOST}:{running_process.pid}:1",
                                             **common)
    elsewhere = GatewayInFlight.objects.create(token=uuid.uuid4(), process="another-host:4242:1", **common)

    call_command("gateway_sweep_cut")

    (cut,) = GatewayAttempt.objects.all()
    assert cut.cut and cut.status == 0 and cut.gateway_session_id == gs.pk and cut.endpoint == "responses"
    assert cut.request_kind == "turn"  # what the client asked for, as its row said
    assert gone.process in cut.error and "ended during this exchange (its process is gone); begun" in cut.error
    assert set(GatewayInFlight.objects.values_list("token", flat=True)) == {running.token, elsewhere.token}
    gs.refresh_from_db()
    assert gs.requests == 2  # the cut exchange was a request the session made
    assert list(LiveItem.objects.filter(session_id=gs.session_id).values_list("item", flat=True)) == history

    # Past the bound, a process elsewhere is taken for ended too.
    GatewayInFlight.objects.filter(pk=elsewhere.pk).update(begun=timezone.now() - dt.timedelta(hours=2))
    call_command("gateway_sweep_cut")
    assert GatewayAttempt.objects.filter(cut=True).count() == 2
    assert list(GatewayInFlight.objects.values_list("token", flat=True)) == [running.token]
    aged = GatewayAttempt.objects.get(cut=True, error__contains=elsewhere.process)
    assert "ended during this exchange (begun over 3600 s ago); begun" in aged.error  # why it was taken for ended
    assert running_process.poll() is None  # the sweeps asked whether it runs, and left it running

    for name in ROLES:  # (a transactional test before this one flushed the groups the migration made)
        Group.objects.get_or_create(name=name)
    client.force_login(make_user("operator"))
    page = client.get(f"/sessions/{gs.session_id}/").content.decode()
    assert 'id="gateway-cut"' in page and "2 exchanges cut" in page


def test_the_next_exchange_is_recorded_whole_after_a_cut_one(sim_upstream, gateway_key, monkeypatch):
    """The first exchange a process takes sweeps what the process before it left: the cut one is an attempt, and
    the client's next request (its history without the cut answer) extends the history as usual."""
    assert turn(gateway_key, [user("fix the parser")]).status_code == 200
    gs = GatewaySession.objects.get()
    GatewayInFlight.objects.create(token=uuid.uuid4(), process=f"{journal.HOST}:{dead_pid()}:1",
                                   route_id=gs.route_id, key_id=gs.key_id, group_key=gs.group_key,
                                   endpoint="responses", request_kind="turn", begun=timezone.now())
    monkeypatch.setattr(journal, "_swept", False)  # as in a process that just started
    first = [i for i in LiveItem.objects.filter(session_id=gs.session_id).order_by("position")
             .values_list("item", flat=True)]
    assert turn(gateway_key, [*first, user("and the docs")], "turn-3").status_code == 200
    assert GatewayAttempt.objects.filter(cut=True, gateway_session=gs).count() == 1
    assert not GatewayInFlight.objects.exists()
    gs.refresh_from_db()
    assert not gs.session.rollout_lines.filter(kind__in=("compacted", "rollback")).exists()


def test_the_age_bound_of_another_hosts_exchange_is_read_from_the_environment(tmp_path):
    # The default is this process's own: its settings were read without the variable (one Django start fewer).
    assert "COMPACTWEB_GATEWAY_CUT_AFTER_SECONDS" not in os.environ
    assert journal.cut_after_seconds() == 3600.0
    code = "import django; django.setup(); from gateway_app import journal; print(journal.cut_after_seconds())"
    bound = _run(["-c", code], tmp_path, COMPACTWEB_GATEWAY_CUT_AFTER_SECONDS="120")
    assert bound.stdout.split()[-1] == "120.0", bound.stderr


@pytest.mark.parametrize("finished_by", ["a dead process's sweep", "the age bound"])
def test_an_exchange_a_sweep_finished_is_not_recorded_again_by_its_own_process(sim_upstream, gateway_key,
                                                                               monkeypatch, finished_by):
    """Its row gone, the record of an exchange the sweep already finished changes nothing: one exchange is counted
    once, whether the sweep wrote it whole (its answer had ended) or cut it (a stream older than the age bound,
    on a host whose processes the sweep cannot see)."""
    assert turn(gateway_key, [user("fix the parser")]).status_code == 200
    gs = GatewaySession.objects.get()
    history = list(LiveItem.objects.filter(session_id=gs.session_id).order_by("position")
                   .values_list("item", flat=True))
    queued: list = []

    async def held(exchange):  # the process's recorder, slower than the sweep
        queued.append(exchange)

    monkeypatch.setattr(recorder.recorder, "put", held)
    assert turn(gateway_key, [*history, user("and the docs")], "turn-2").status_code == 200
    (row,) = GatewayInFlight.objects.all()
    if finished_by == "the age bound":
        GatewayInFlight.objects.filter(pk=row.pk).update(process="another-host:4242:1", ended=False,
                                                         begun=timezone.now() - dt.timedelta(hours=2))
    else:
        GatewayInFlight.objects.filter(pk=row.pk).update(process=f"{journal.HOST}:{dead_pid()}:1")
    call_command("gateway_sweep_cut")
    gs.refresh_from_db()
    swept = list(LiveItem.objects.filter(session_id=gs.session_id).order_by("position")
                 .values_list("item", flat=True))
    assert gs.requests == 2 and not GatewayInFlight.objects.exists()
    assert GatewayAttempt.objects.filter(cut=True).count() == (finished_by == "the age bound")

    (exchange,) = queued
    recording.do_record_exchange(exchange=exchange)  # the process's own record, after the sweep's

    gs.refresh_from_db()
    assert gs.requests == 2  # counted once
    assert list(LiveItem.objects.filter(session_id=gs.session_id).order_by("position")
                .values_list("item", flat=True)) == swept
    assert len(swept) == len(history) + (2 if finished_by != "the age bound" else 0)


def test_a_client_that_hangs_up_while_the_end_waits_leaves_a_row_that_says_so(sim_upstream, gateway_key,
                                                                              monkeypatch):
    """The answer's end waits for the row's update; a client that hangs up meanwhile never gets it: the row then
    says the client went away, as the recorder records it, so a process killed before the record leaves a
    client-gone attempt, not an answer the client did not receive."""
    held, release = threading.Event(), threading.Event()
    real = journal.do_end
    ends: list[str] = []

    def slow_end(**kwargs):
        ends.append(kwargs["error"])
        if len(ends) == 1:
            held.set()
            assert release.wait(30)
        real(**kwargs)

    async def lost(exchange):  # the process dies before its recorder writes anything
        pass

    monkeypatch.setattr(journal, "do_end", slow_end)
    monkeypatch.setattr(recorder.recorder, "put", lost)
    app = http_router(get_asgi_application())
    raw = json.dumps({"model": "compactweb-sim", "stream": True, "input": [BASE, user("hello")]}).encode()
    headers = {**bearer(gateway_key), **meta(THREAD), "content-type": "application/json"}
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": "/gateway/v1/responses", "raw_path": b"/gateway/v1/responses", "query_string": b"",
             "root_path": "", "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 80),
             "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()]}
    sent: list[dict] = []

    async def go():
        requests = [{"type": "http.request", "body": raw, "more_body": False}]
        gone = asyncio.Event()

        async def receive():
            if requests:
                return requests.pop()
            await gone.wait()
            return {"type": "http.disconnect"}

        async def send(message):
            sent.append(message)

        served = asyncio.ensure_future(app(scope, receive, send))
        assert await asyncio.to_thread(held.wait, 30)
        gone.set()  # the client hangs up while the end waits
        await asyncio.sleep(0.2)
        release.set()
        await served

    async_to_sync(go)()
    body = b"".join(m.get("body", b"") for m in sent)
    assert b"response.completed" not in body  # the client never got the end
    (row,) = GatewayInFlight.objects.all()
    assert ends == ["", proxy.CLIENT_GONE] and row.ended and row.error == proxy.CLIENT_GONE
    GatewayInFlight.objects.filter(pk=row.pk).update(process=f"{journal.HOST}:{dead_pid()}:1")
    call_command("gateway_sweep_cut")
    (attempt,) = GatewayAttempt.objects.all()
    assert attempt.status == 0 and "disconnected" in attempt.error
    gs = GatewaySession.objects.get()
    assert not LiveItem.objects.filter(session_id=gs.session_id, item__role="assistant").exists()


def test_an_exchange_that_could_not_be_noted_goes_on_and_the_log_says_a_crash_now_loses_it(monkeypatch):
    def refused(**kwargs):
        raise RuntimeError("database gone")

    monkeypatch.setattr(journal, "_swept", True)
    monkeypatch.setattr(journal, "do_begin", refused)
    with logged_by("gateway_app.journal") as records, pytest.raises(RuntimeError):
        journal._begin_on_thread(token=uuid.uuid4(), exchange={})
    (logged,) = records
    assert logged.getMessage() == ("gateway: an exchange could not be noted as begun (it goes on; a crash now "
                                   "loses it)")
    assert logged.exc_info[1].args == ("database gone",)


def test_only_a_process_first_exchange_sweeps_what_the_process_before_it_left(monkeypatch):
    sweeps: list[int] = []
    monkeypatch.setattr(journal, "_swept", False)  # as in a process that just started
    monkeypatch.setattr(journal, "do_sweep_cut", lambda: sweeps.append(1) or 0)
    monkeypatch.setattr(journal, "do_begin", lambda **kwargs: None)
    for _ in range(3):
        journal._begin_on_thread(token=uuid.uuid4(), exchange={})
    assert sweeps == [1]


def test_an_answer_that_came_in_pieces_is_journaled_as_its_bytes_end_to_end(sim_upstream, gateway_key):
    assert turn(gateway_key, [user("fix the parser")]).status_code == 200
    gs = GatewaySession.objects.get()
    token = uuid.uuid4()
    GatewayInFlight.objects.create(token=token, process=journal.PROCESS, route_id=gs.route_id, key_id=gs.key_id,
                                   group_key=gs.group_key, endpoint="responses", request_kind="turn",
                                   begun=timezone.now())

    async def end():
        noted = asyncio.get_running_loop().create_future()
        noted.set_result(None)
        await journal.Begun(token, noted).ended(status=200, error="", answer_format="sse",
                                                answer=[b"event: one\n\n", b"event: two\n\n"])

    async_to_sync(end)()
    row = GatewayInFlight.objects.get(pk=token)
    assert row.ended and bytes(row.answer) == b"event: one\n\nevent: two\n\n"


def _ended_rows_of_a_dead_process(gateway_key, monkeypatch) -> list[GatewayInFlight]:
    """Two exchanges (two conversations) whose answers ended and were journaled, their process killed before its
    recorder wrote them."""
    async def lost(exchange):
        pass

    monkeypatch.setattr(recorder.recorder, "put", lost)
    for thread in (THREAD, "0190eeee-0000-7000-8000-000000000002"):
        body = {"model": "compactweb-sim", "stream": True, "input": [BASE, user("fix the parser")]}
        answer = call("POST", "/gateway/v1/responses", json=body, headers={**bearer(gateway_key), **meta(thread)})
        assert answer.status_code == 200
    GatewayInFlight.objects.update(process=f"{journal.HOST}:{dead_pid()}:1")
    rows = list(GatewayInFlight.objects.all())
    assert len(rows) == 2 and all(row.ended for row in rows)
    return rows


def test_a_sweep_records_every_ended_exchange_of_a_dead_process_whole_and_says_how_many(
        sim_upstream, gateway_key, monkeypatch):
    _ended_rows_of_a_dead_process(gateway_key, monkeypatch)

    with logged_by("gateway_app.journal") as records:
        assert journal.do_sweep_cut() == 2
    assert not GatewayInFlight.objects.exists() and not GatewayAttempt.objects.exists()
    assert sorted(GatewaySession.objects.values_list("requests", flat=True)) == [1, 1]
    assert [r.getMessage() for r in records] == [
        "gateway: 2 exchange(s) whose gateway process ended before their record recorded whole from the journal"]


def test_a_journaled_record_that_cannot_be_written_is_cut_and_the_log_names_its_exchange(
        sim_upstream, gateway_key, monkeypatch):
    rows = _ended_rows_of_a_dead_process(gateway_key, monkeypatch)

    def broken(*, exchange):
        raise RuntimeError("record refused")

    monkeypatch.setattr(recording, "do_record_exchange", broken)
    with logged_by("gateway_app.journal") as records:
        assert journal.do_sweep_cut() == 2
    assert GatewayAttempt.objects.filter(cut=True).count() == 2 and not GatewayInFlight.objects.exists()
    logged = [r.getMessage() for r in records]
    assert sorted(logged[:2]) == sorted(f"gateway: the journaled record of exchange {row.token} could not be "
                                        "written; it is cut" for row in rows)


def test_a_sweep_cuts_a_dead_process_exchange_begun_after_a_running_one_and_logs_how_many_it_cut(
        sim_upstream, gateway_key, running_process):
    """The sweep reads the rows oldest first: one whose process still runs is passed over, not the end of the
    sweep, so a dead process's exchange begun after it is cut all the same; the log says how many were cut."""
    assert turn(gateway_key, [user("fix the parser")]).status_code == 200
    gs = GatewaySession.objects.get()
    common = dict(route_id=gs.route_id, key_id=gs.key_id, group_key=gs.group_key, endpoint="responses",
                  request_kind="turn")
    running = GatewayInFlight.objects.create(token=uuid.uuid4(), process=f"{journal.HOST}:{running_process.pid}:1",
                                             begun=timezone.now() - dt.timedelta(seconds=5), **common)
    gone = GatewayInFlight.objects.create(token=uuid.uuid4(), process=f"{journal.HOST}:{dead_pid()}:1",
                                          begun=timezone.now(), **common)

    with logged_by("gateway_app.journal") as records:
        assert journal.do_sweep_cut() == 1
    (cut,) = GatewayAttempt.objects.all()
    assert cut.cut and gone.process in cut.error
    assert list(GatewayInFlight.objects.values_list("token", flat=True)) == [running.token]
    assert [r.getMessage() for r in records] == [
        "gateway: 1 exchange(s) cut by the end of their gateway process recorded as cut"]


def test_a_cut_exchange_of_a_users_key_counts_on_the_session_of_its_own_route(sim_upstream, operator_user):
    """A user's key works on every route that allows user keys, so one conversation (one group key) has a session
    per route: a cut exchange is the request of the session on the route it went through."""
    routes = []
    for rpm in (601, 602):
        route = make_route(rpm=rpm)
        route.allow_user_keys = True
        route.save()
        routes.append(route)
    key = keys.do_create_user_gateway_key(user=operator_user, name="laptop").key
    body = {"model": "compactweb-sim", "stream": True, "input": [BASE, user("fix the parser")]}
    for route in routes:
        answer = call("POST", f"/gateway/r/{route.name}/v1/responses", json=body,
                      headers={**bearer(key), **meta(THREAD)})
        assert answer.status_code == 200
    sessions = {gs.route_id: gs for gs in GatewaySession.objects.all()}
    assert len(sessions) == 2 and len({gs.group_key for gs in sessions.values()}) == 1
    for gs in sessions.values():
        GatewayInFlight.objects.create(token=uuid.uuid4(), process=f"{journal.HOST}:{dead_pid()}:1",
                                       route_id=gs.route_id, key_id=gs.key_id, group_key=gs.group_key,
                                       endpoint="responses", request_kind="turn", begun=timezone.now())

    assert journal.do_sweep_cut() == 2
    for route_id, gs in sessions.items():
        (cut,) = GatewayAttempt.objects.filter(route_id=route_id)
        assert cut.cut and cut.gateway_session_id == gs.pk
        gs.refresh_from_db()
        assert gs.requests == 2


def test_a_failed_start_up_sweep_is_logged_and_the_exchange_is_still_noted(monkeypatch):
    def broken():
        raise RuntimeError("sweep refused")

    noted: list[uuid.UUID] = []
    monkeypatch.setattr(journal, "_swept", False)  # as in a process that just started
    monkeypatch.setattr(journal, "do_sweep_cut", broken)
    monkeypatch.setattr(journal, "do_begin", lambda *, token, exchange, process: noted.append(token))
    token = uuid.uuid4()
    with logged_by("gateway_app.journal") as records:
        journal._begin_on_thread(token=token, exchange={})
    assert noted == [token]
    (logged,) = records
    assert logged.getMessage() == "gateway: the start-up sweep of cut exchanges failed"
    assert logged.exc_info[1].args == ("sweep refused",)


def test_an_exchange_still_streaming_at_a_clean_exit_is_cut_as_stopped_with_the_process(
        sim_upstream, gateway_key, monkeypatch):
    """At a clean exit (SIGTERM) the exchanges not yet handed to the recorder are cut by the stop itself, and the
    cut says so rather than that their process is gone."""
    assert turn(gateway_key, [user("fix the parser")]).status_code == 200
    gs = GatewaySession.objects.get()
    token = uuid.uuid4()
    GatewayInFlight.objects.create(token=token, process=journal.PROCESS, route_id=gs.route_id, key_id=gs.key_id,
                                   group_key=gs.group_key, endpoint="responses", request_kind="turn",
                                   begun=timezone.now())
    monkeypatch.setattr(journal, "_in_flight", {token})

    journal.cut_at_exit()
    assert recorder.recorder.drain()
    (cut,) = GatewayAttempt.objects.all()
    assert cut.cut and cut.gateway_session_id == gs.pk
    assert f"gateway process {journal.PROCESS} ended during this exchange (the process was stopped)" in cut.error
    assert not GatewayInFlight.objects.exists()


def test_an_exchange_handed_to_the_recorder_is_left_to_its_record_at_a_clean_exit(sim_upstream, gateway_key,
                                                                                  monkeypatch):
    """Once its record is queued an exchange is the recorder's to finish: a clean exit before the record is
    written does not sweep it as well (its queued record, written after, deletes its row)."""
    queued: list = []

    async def held(exchange):  # the recorder, not yet at this record
        queued.append(exchange)

    monkeypatch.setattr(recorder.recorder, "put", held)
    monkeypatch.setattr(journal, "_in_flight", set())
    assert turn(gateway_key, [user("fix the parser")]).status_code == 200
    (row,) = GatewayInFlight.objects.all()

    journal.cut_at_exit()
    assert recorder.recorder.drain()
    assert GatewayInFlight.objects.filter(pk=row.pk).exists() and not GatewayAttempt.objects.exists()
    (exchange,) = queued
    recording.do_record_exchange(exchange=exchange)
    assert not GatewayInFlight.objects.exists() and GatewaySession.objects.get().requests == 1


def test_an_end_that_could_not_be_journaled_is_logged_saying_a_crash_before_its_record_cuts_it(monkeypatch):
    class Refused:
        class objects:  # noqa: N801 (the model's manager)
            @staticmethod
            def filter(**kwargs):
                raise RuntimeError("database gone")

    monkeypatch.setattr(journal, "GatewayInFlight", Refused)
    with logged_by("gateway_app.journal") as records, pytest.raises(RuntimeError):
        journal.do_end(token=uuid.uuid4(), status=200, error="", answer_format="sse", answer=b"")
    (logged,) = records
    assert logged.getMessage() == ("gateway: an exchange's end could not be journaled (a crash before its record "
                                   "cuts it)")
    assert logged.exc_info[1].args == ("database gone",)


def test_an_end_that_could_not_be_journaled_is_logged_once_not_again_by_asyncio(monkeypatch):
    """The journal logs its failed write on its thread; the event loop does not log the same failure again."""
    def refused(**kwargs):
        raise RuntimeError("database gone")

    monkeypatch.setattr(journal, "do_end", refused)

    async def end():
        noted = asyncio.get_running_loop().create_future()
        noted.set_result(None)
        await journal.Begun(uuid.uuid4(), noted).ended(status=200, error="", answer_format="sse", answer=[b""])
        await asyncio.sleep(0.1)  # the loop's callbacks after the write ran

    with logged_by("asyncio") as records:
        async_to_sync(end)()
    assert [r.getMessage() for r in records] == []


def test_housekeeping_sweeps_only_when_another_process_of_this_host_or_an_old_exchange_left_a_note(
        gateway_key, route, monkeypatch):
    """The housekeeping receiver's one read: this process's own exchanges in flight are no reason to sweep (it is
    running), another process's of this host is."""
    swept: list[int] = []
    monkeypatch.setattr(journal, "do_sweep_cut", lambda: swept.append(1) or 0)
    key = keys.key_for(presented=gateway_key)
    common = dict(route_id=route.pk, key_id=key.pk, group_key="thread:x", endpoint="responses", request_kind="turn")
    GatewayInFlight.objects.create(token=uuid.uuid4(), process=journal.PROCESS, begun=timezone.now(), **common)
    journal.sweep_on_housekeeping()
    assert swept == []
    GatewayInFlight.objects.create(token=uuid.uuid4(), process=f"{journal.HOST}:{dead_pid()}:1",
                                   begun=timezone.now(), **common)
    journal.sweep_on_housekeeping()
    assert swept == [1]


def test_a_note_still_under_way_when_its_loop_stops_is_not_logged_by_asyncio(monkeypatch):
    """A process stopping cancels the notes still under way: a cancelled note is no failure for asyncio to log (the
    done callback reads a note's failure only when it has one)."""
    release = threading.Event()
    monkeypatch.setattr(journal, "_swept", True)
    monkeypatch.setattr(journal, "_in_flight", set())
    monkeypatch.setattr(journal, "do_begin", lambda **kwargs: release.wait(10))

    async def stop_while_noting():
        begun = journal.begin({})
        await asyncio.sleep(0.05)
        begun.future.cancel()
        await asyncio.sleep(0.1)  # the loop's callbacks after the cancellation ran
        return begun.future.cancelled()

    with logged_by("asyncio") as records:
        cancelled = async_to_sync(stop_while_noting)()
    release.set()
    assert cancelled and [r.getMessage() for r in records] == []
