"""Storm, loop, re-read and failure-streak alerts through the public paths (compact API, turns with a scripted
model client), their links, the pause, the re-read tax, and the alert hooks (outbound rule respected)."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import ValidationError

from compaction_app.engine.items import user_message
from compaction_app.models import Alert, AlertSettings, Compaction, CompactionPolicy, Hook
from compaction_app.validators import validate_outbound_url
from sessions_app.compactions import alerts
from sessions_app.models import RolloutLine, Session, SimulatorRun
from sessions_app.simulator import load_scenario
from sessions_app.turns.services import TurnScript, run_turn
from tests.compaction_app.engine.fakes import FakeClient, assistant, completed, done

SENT: list[dict] = []


def record_alert(request: dict) -> None:
    SENT.append(request)


@pytest.fixture(autouse=True)
def _fast(no_engine_sleeps):
    SENT.clear()


def settings(**values) -> AlertSettings:
    row = AlertSettings.current()
    for key, value in values.items():
        setattr(row, key, value)
    row.save()
    return row


def read_call(call_id: str, path: str) -> dict:
    return {"type": "function_call", "call_id": call_id, "name": "read_file", "arguments": json.dumps({"path": path})}


def compact(api, session, strategy="local"):
    response = api.post(f"/api/v1/sessions/{session.pk}/compact", {"strategy": strategy}, format="json")
    assert response.status_code in (201, 502), response.content
    return response.json()


@pytest.mark.django_db
def test_a_storm_in_one_session_is_alerted_once_with_its_compactions(operator_api, reader):
    settings(storm_count=1, storm_minutes=10)
    first, second = compact(operator_api, reader), compact(operator_api, reader)
    (alert,) = Alert.objects.filter(kind="storm")
    assert alert.session_id == reader.pk
    assert set(alert.compactions.values_list("pk", flat=True)) == {first["id"], second["id"]}
    compact(operator_api, reader)
    assert Alert.objects.filter(kind="storm").count() == 1


@pytest.mark.django_db
def test_a_streak_of_failed_attempts_is_alerted_with_the_attempts(operator_api, operator_user, reader):
    settings(failure_streak=2)
    Session.objects.filter(pk=reader.pk).update(fault_injection={"fault": "overloaded"})
    first, second = compact(operator_api, reader), compact(operator_api, reader)
    (alert,) = Alert.objects.filter(kind="failure_streak")
    assert set(alert.attempts.values_list("pk", flat=True)) == {first["error"]["attempt_id"],
                                                                second["error"]["attempt_id"]}
    from django.test import Client

    client = Client()
    client.force_login(operator_user)
    board = client.get("/").content.decode()
    assert f"attempt #{first['error']['attempt_id']} (server overloaded)" in board  # the kind in words


@pytest.mark.django_db
def test_a_growing_failure_streak_rewrites_its_open_alerts_message_with_its_length(operator_api, reader,
                                                                                   django_capture_on_commit_callbacks,
                                                                                   monkeypatch):
    # Each failure past the threshold raises again: the badge counted them while the message kept saying the
    # threshold's "2 compaction attempts failed in a row" (issue 46: a message follows its count at every raise).
    pushed = []
    monkeypatch.setattr(alerts.events, "publish_alert_event", lambda **kw: pushed.append(kw["alert_id"]))
    settings(failure_streak=2)
    Session.objects.filter(pk=reader.pk).update(fault_injection={"fault": "overloaded"})
    for _ in range(4):
        with django_capture_on_commit_callbacks(execute=True):
            compact(operator_api, reader)
    (alert,) = Alert.objects.filter(kind="failure_streak")
    assert alert.count == 3 and alert.message == "4 compaction attempts failed in a row"
    assert pushed[-1] == alert.pk and len(pushed) == 3  # every raise reached the live pages
    # A success ends the streak: a new streak counts from one again on the still-open alert.
    Session.objects.filter(pk=reader.pk).update(fault_injection={})
    compact(operator_api, reader)
    Session.objects.filter(pk=reader.pk).update(fault_injection={"fault": "overloaded"})
    compact(operator_api, reader), compact(operator_api, reader)
    alert.refresh_from_db()
    assert alert.count == 4 and alert.message == "2 compaction attempts failed in a row"


def scenario_tools():
    return load_scenario("fix-failing-test").build_tools(seed=1)


@pytest.fixture
def unchanged_reader(make_session):
    """A session that read src/ledger.py as the scenario's file system has it (a re-read gets the same text)."""
    import random

    from sessions_app.simulator.tools import answer_tool_call

    first, _ = answer_tool_call(read_call("c1", "src/ledger.py"), scenario_tools(), random.Random(1))
    return make_session(items=[user_message("look at src/ledger.py"), read_call("c1", "src/ledger.py"), first,
                               user_message("now fix it")])


def re_read_after_compacting(api, reader) -> int:
    """Compact `reader` (dropping src/ledger.py), then a turn that reads the file again; the compaction's id."""
    settings(reread_min_calls=1, reread_turns=3)
    compaction_id = compact(api, reader)["id"]
    client = FakeClient(streams=[[done(read_call("r1", "src/ledger.py")), completed(500, 20)],
                                 [done(assistant("read it again")), completed(900, 10)]])
    tools = load_scenario("fix-failing-test").build_tools(seed=1)
    result = run_turn(session_id=reader.pk, user_input="what was in that file?", script=TurnScript(tools=tools),
                      client=client)
    assert result.ok, result.error
    return compaction_id


@pytest.mark.django_db
def test_re_reading_what_a_compaction_dropped_is_alerted_and_taxed(operator_api, unchanged_reader):
    reader = unchanged_reader
    compaction_id = re_read_after_compacting(operator_api, reader)
    (alert,) = Alert.objects.filter(kind="reread")
    assert list(alert.compactions.values_list("pk", flat=True)) == [compaction_id]
    assert "src/ledger.py" in alert.message
    assert Compaction.objects.get(pk=compaction_id).reread_tokens > 0


@pytest.mark.django_db
def test_a_re_read_alert_weighs_the_re_fetched_tokens_against_the_tokens_its_compaction_freed(
    operator_api, unchanged_reader
):
    """The operator reads the share: re-fetched tokens against what the compaction freed (before minus after)."""
    compaction = Compaction.objects.get(pk=re_read_after_compacting(operator_api, unchanged_reader))
    (alert,) = Alert.objects.filter(kind="reread")
    freed = compaction.tokens_before - compaction.tokens_after
    assert 0 < compaction.tokens_after < compaction.tokens_before
    assert alert.message.endswith(f"{compaction.reread_tokens:,} tokens of the {freed:,} it freed")


@pytest.mark.django_db
def test_the_re_read_tax_is_a_rollout_line_naming_the_window_its_compaction_opened(operator_api, unchanged_reader):
    """The tax is kept in the session's rollout too (usage_lines.REREAD_USAGE), so an export carries it: one line
    naming the compaction's window by id and number, its tokens the compaction's tax."""
    compaction_id = re_read_after_compacting(operator_api, unchanged_reader)
    compaction = Compaction.objects.get(pk=compaction_id)
    (line,) = RolloutLine.objects.filter(session=unchanged_reader, payload__type="compaction_reread_usage")
    assert compaction.reread_tokens > 0 and compaction.window_id
    assert (line.payload["window_id"], line.payload["window_number"]) == (compaction.window_id,
                                                                          compaction.window_number)
    assert line.payload["info"]["last_token_usage"]["total_tokens"] == compaction.reread_tokens


def reread_lines(session) -> list[int]:
    return [line.payload["info"]["last_token_usage"]["total_tokens"] for line in RolloutLine.objects.filter(
        session=session, payload__type="compaction_reread_usage").order_by("seq")]


@pytest.mark.django_db
def test_a_turn_after_a_compaction_that_fetches_nothing_it_dropped_is_taxed_nothing(operator_api, unchanged_reader):
    """Only the turn's own items are the watch's: the read of src/ledger.py before the compaction is not a
    re-read, and a turn with nothing to tax writes no tax line."""
    settings(reread_min_calls=1, reread_turns=3)
    compaction_id = compact(operator_api, unchanged_reader)["id"]
    client = FakeClient(streams=[[done(assistant("fixed, nothing to read")), completed(500, 10)]])
    assert run_turn(session_id=unchanged_reader.pk, user_input="go on", script=TurnScript(tools=scenario_tools()),
                    client=client).ok
    assert not Alert.objects.filter(kind="reread").exists()
    assert Compaction.objects.get(pk=compaction_id).reread_tokens == 0
    assert reread_lines(unchanged_reader) == []


@pytest.mark.django_db
def test_each_re_reading_turn_adds_its_own_tax_to_the_compaction_and_the_rollout(operator_api, unchanged_reader):
    compaction_id = re_read_after_compacting(operator_api, unchanged_reader)
    first = Compaction.objects.get(pk=compaction_id).reread_tokens
    client = FakeClient(streams=[[done(read_call("r2", "src/ledger.py")), completed(500, 20)],
                                 [done(assistant("read it once more")), completed(900, 10)]])
    assert run_turn(session_id=unchanged_reader.pk, user_input="and again?", script=TurnScript(tools=scenario_tools()),
                    client=client).ok
    total = Compaction.objects.get(pk=compaction_id).reread_tokens
    # The tax is what the re-fetched outputs cost: each turn adds its own output's tokens, once.
    outputs = dict(RolloutLine.objects.filter(session=unchanged_reader, payload__type="function_call_output",
                                              payload__call_id__in=["r1", "r2"]).values_list("payload__call_id",
                                                                                              "tokens"))
    assert first == outputs["r1"] > 0 and total == outputs["r1"] + outputs["r2"]
    assert reread_lines(unchanged_reader) == [outputs["r1"], outputs["r2"]]


@pytest.mark.django_db
def test_fetching_a_dropped_file_whose_content_changed_is_not_a_re_read(operator_api, reader):
    """The file the session read differs from what the scenario's file system now holds: reading it again is
    following a change, not forgetting; no alert, no tax."""
    settings(reread_min_calls=1, reread_turns=3)
    compaction_id = compact(operator_api, reader)["id"]
    client = FakeClient(streams=[[done(read_call("r1", "src/ledger.py")), completed(500, 20)],
                                 [done(assistant("read it again")), completed(900, 10)]])
    assert run_turn(session_id=reader.pk, user_input="what is in it now?", script=TurnScript(tools=scenario_tools()),
                    client=client).ok
    assert not Alert.objects.filter(kind="reread").exists()
    assert Compaction.objects.get(pk=compaction_id).reread_tokens == 0


@pytest.mark.django_db
def test_re_running_a_dropped_test_command_is_not_a_re_read(operator_api, make_session):
    settings(reread_min_calls=1, reread_turns=3)
    run = {"type": "function_call", "call_id": "t1", "name": "shell",
           "arguments": json.dumps({"command": ["bash", "-lc", "pytest -q"]})}
    session = make_session(items=[user_message("run the tests"), run,
                                  {"type": "function_call_output", "call_id": "t1", "output": "Exit code: 1\nFAILED"},
                                  user_message("fix it")])
    compact(operator_api, session)
    again = {**run, "call_id": "t2"}
    client = FakeClient(streams=[[done(again), completed(500, 20)], [done(assistant("ran")), completed(900, 10)]])
    assert run_turn(session_id=session.pk, user_input="again", script=TurnScript(tools=scenario_tools()),
                    client=client).ok
    assert not Alert.objects.filter(kind="reread").exists()


@pytest.mark.django_db
def test_usage_back_over_the_limit_right_after_a_compaction_is_a_loop_that_can_pause(operator_api, reader, policy):
    settings(loop_turns=2, pause_on=["loop"])
    SimulatorRun.objects.create(session=reader, scenario="fix-failing-test")
    compaction_id = compact(operator_api, reader)["id"]
    limit = Session.objects.get(pk=reader.pk).tokens_in_window + 100
    CompactionPolicy.objects.filter(pk=policy.pk).update(auto_compact_token_limit=limit)
    client = FakeClient(streams=[[done(assistant("a long answer")), completed(limit + 500, 10)]])
    assert run_turn(session_id=reader.pk, user_input="go on", client=client).ok
    (alert,) = Alert.objects.filter(kind="loop")
    assert list(alert.compactions.values_list("pk", flat=True)) == [compaction_id] and alert.paused
    assert SimulatorRun.objects.get(session=reader).status == SimulatorRun.Status.PAUSED


@pytest.mark.django_db
def test_alert_hooks_receive_the_alert_and_a_refused_webhook_is_not_called(
        operator_api, reader, monkeypatch, django_capture_on_commit_callbacks):
    Hook.objects.create(name="recorder", event="alert", kind="callable",
                        target="tests.compaction_app.api.test_alerts.record_alert")
    Hook.objects.create(name="bad", event="alert", kind="webhook", target="http://user:secret@example.invalid/x")
    assert [spec.name for spec in alerts.allowed_alert_hooks()] == ["recorder"]
    monkeypatch.setattr(alerts.background, "submit", lambda task, **kwargs: task(**kwargs))
    settings(failure_streak=1)
    Session.objects.filter(pk=reader.pk).update(fault_injection={"fault": "overloaded"})
    with django_capture_on_commit_callbacks(execute=True):
        attempt_id = compact(operator_api, reader)["error"]["attempt_id"]
    (sent,) = SENT
    assert (sent["hook_event_name"], sent["kind"], sent["session_id"]) == ("Alert", "failure_streak", reader.pk)
    assert sent["attempt_ids"] == [attempt_id]


@pytest.mark.django_db
def test_a_refused_alert_webhook_is_logged_with_why(caplog):
    target = "http://user:secret@example.invalid/x"
    Hook.objects.create(name="bad", event="alert", kind="webhook", target=target)
    with pytest.raises(ValidationError) as refused:
        validate_outbound_url(target)
    why = " ".join(refused.value.messages)

    with caplog.at_level("WARNING", logger="sessions_app.compactions.alerts"):
        assert alerts.allowed_alert_hooks() == []

    assert why and [r.getMessage() for r in caplog.records] == [f"alert hook bad not called: {why}"]


@pytest.mark.django_db
def test_the_fleet_board_lists_alerts_with_links_to_their_compactions(operator_user, operator_api, reader):
    from django.test import Client

    settings(storm_count=1)
    ids = [compact(operator_api, reader)["id"] for _ in range(2)]
    client = Client()
    client.force_login(operator_user)
    body = client.get("/").content.decode()
    board = body[body.index('id="fleet-alerts"'):]
    assert "compaction storm" in board
    for pk in ids:
        assert f'href="/compactions/{pk}/"' in board


@pytest.mark.django_db
def test_a_storm_alert_hook_hears_the_compactions_of_the_storm(
        operator_api, reader, monkeypatch, django_capture_on_commit_callbacks):
    Hook.objects.create(name="recorder", event="alert", kind="callable",
                        target="tests.compaction_app.api.test_alerts.record_alert")
    monkeypatch.setattr(alerts.background, "submit", lambda task, **kwargs: task(**kwargs))
    settings(storm_count=1, storm_minutes=10)
    with django_capture_on_commit_callbacks(execute=True):
        first = compact(operator_api, reader)
    with django_capture_on_commit_callbacks(execute=True):
        second = compact(operator_api, reader)
    (sent,) = [s for s in SENT if s["kind"] == "storm"]
    assert sent["compaction_ids"] == [first["id"], second["id"]]


@pytest.mark.django_db
def test_compactions_imported_as_history_are_no_part_of_a_sessions_storm(operator_api, reader):
    settings(storm_count=1, storm_minutes=10)
    imported = compact(operator_api, reader)
    # what an import writes: a compaction of the session's past, not one seen live (issue 44)
    Compaction.objects.filter(pk=imported["id"]).update(history=True)
    compact(operator_api, reader)
    assert not Alert.objects.filter(kind="storm").exists()


@pytest.mark.django_db
def test_a_storm_counted_again_does_not_keep_a_fleet_storm_raised_with_it_from_being_raised(operator_api, reader):
    settings(storm_count=1, storm_minutes=10, fleet_storm_count=2, fleet_storm_per_session=0)
    compact(operator_api, reader)
    compact(operator_api, reader)  # the session's storm, raised; the fleet's 2 are not past its 2
    compact(operator_api, reader)  # the session's storm counted again, and the fleet's first raised
    assert Alert.objects.get(kind="storm").count == 2
    assert Alert.objects.filter(kind="fleet_storm", session=None).count() == 1


@pytest.mark.django_db
def test_re_reading_a_file_whose_output_masking_hid_is_alerted(operator_api, unchanged_reader):
    reader = unchanged_reader
    # masking keeps the read call and hides its output: what was dropped is found through the masked call ids
    CompactionPolicy.objects.filter(pk=reader.policy_id).update(masking_keep_turns=0)
    settings(reread_min_calls=1, reread_turns=3)
    compaction_id = compact(operator_api, reader, strategy="masking")["id"]
    client = FakeClient(streams=[[done(read_call("r1", "src/ledger.py")), completed(500, 20)],
                                 [done(assistant("read it again")), completed(900, 10)]])
    result = run_turn(session_id=reader.pk, user_input="what was in that file?",
                      script=TurnScript(tools=scenario_tools()), client=client)
    assert result.ok, result.error
    (alert,) = Alert.objects.filter(kind="reread")
    assert list(alert.compactions.values_list("pk", flat=True)) == [compaction_id]
    assert "src/ledger.py" in alert.message
