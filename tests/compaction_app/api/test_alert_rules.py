"""The alert room's rules one by one (issue 43: a planted bug dies in the alerts room): how long a snooze lasts,
how the alerts API parts open, snoozed and acknowledged alerts, when a repeat counts and when it opens a new alert,
who hears of a raise and when a rule pauses its session."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from compaction_app.engine import alerts as rules
from compaction_app.models import Alert, AlertSilence, AuditEntry, Hook, SessionWatch
from sessions_app.compactions import alerts
from sessions_app.models import Session
from tests.compaction_app.api.test_alerts import SENT, compact, settings

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fast(no_engine_sleeps):
    SENT.clear()


def raise_alert(kind: rules.AlertKind, session_id: int, message: str = "m") -> list[Alert]:
    with transaction.atomic():
        return alerts._raise([rules.Alert(kind=kind, message=message)], session_id=session_id,
                             limits=alerts.thresholds())


def listed(api, **filters) -> list[int]:
    answer = api.get("/api/v1/alerts", filters)
    assert answer.status_code == 200, answer.content
    return [a["id"] for a in answer.json()]


def test_a_snooze_holds_alerts_back_only_until_it_ends(operator_api, reader):
    snoozed = operator_api.post("/api/v1/alerts/silences", {"kind": "loop", "session": reader.pk, "minutes": 5},
                                format="json").json()
    until = AlertSilence.objects.get(pk=snoozed["id"]).until
    assert timezone.now() + timedelta(minutes=4) < until <= timezone.now() + timedelta(minutes=5)
    assert raise_alert(rules.AlertKind.LOOP, reader.pk) == []
    AlertSilence.objects.filter(pk=snoozed["id"]).update(until=timezone.now() - timedelta(seconds=1))
    (alert,) = raise_alert(rules.AlertKind.LOOP, reader.pk)
    assert listed(operator_api, state="open") == [alert.pk]
    assert alerts.is_silenced(kind="loop", session_id=reader.pk) is False


def test_a_silence_without_minutes_lasts_until_lifted(operator_api, reader):
    silenced = operator_api.post("/api/v1/alerts/silences", {"kind": "loop", "session": reader.pk},
                                 format="json").json()
    assert silenced["until"] is None
    far = timezone.now() + timedelta(days=400)
    assert alerts.is_silenced(kind="loop", session_id=reader.pk, now=far)


def test_a_snooze_is_judged_at_the_time_given_not_at_the_clocks(reader):
    AlertSilence.objects.create(kind="loop", session=reader, until=timezone.now() + timedelta(minutes=5))
    assert alerts.is_silenced(kind="loop", session_id=reader.pk, now=timezone.now())
    assert not alerts.is_silenced(kind="loop", session_id=reader.pk, now=timezone.now() + timedelta(minutes=10))


def test_every_silence_in_force_covers_what_it_covers_not_only_the_last_set(reader, make_session):
    other = make_session(title="other")
    AlertSilence.objects.create(kind="loop", session=reader)
    AlertSilence.objects.create(kind="storm", session=other)
    assert alerts.is_silenced(kind="loop", session_id=reader.pk)
    assert alerts.is_silenced(kind="storm", session_id=other.pk)
    assert not alerts.is_silenced(kind="storm", session_id=reader.pk)


def test_the_api_parts_unacknowledged_alerts_into_open_and_snoozed_and_lists_acknowledged_apart(
        operator_api, reader, make_session):
    other = make_session(title="other")
    (loud,) = raise_alert(rules.AlertKind.LOOP, other.pk)
    (quiet,) = raise_alert(rules.AlertKind.LOOP, reader.pk)
    (done,) = raise_alert(rules.AlertKind.FAILURE_STREAK, reader.pk)  # acknowledged, in the snoozed session
    assert operator_api.post(f"/api/v1/alerts/{done.pk}/acknowledge").status_code == 200
    operator_api.post("/api/v1/alerts/silences", {"session": reader.pk, "minutes": 30}, format="json")

    assert listed(operator_api, state="open") == [loud.pk]
    assert listed(operator_api, state="snoozed") == [quiet.pk]
    assert listed(operator_api, state="acknowledged") == [done.pk]
    assert sorted(listed(operator_api)) == sorted([loud.pk, quiet.pk, done.pk])
    assert sorted(listed(operator_api, kind="loop")) == sorted([loud.pk, quiet.pk])
    assert listed(operator_api, session=other.pk) == [loud.pk]
    assert sorted(listed(operator_api, session=reader.pk)) == sorted([quiet.pk, done.pk])
    assert list(alerts.open_alerts()) == [loud]


def test_the_api_lists_alerts_raised_since_a_time_newest_first(operator_api, reader, make_session):
    (old,) = raise_alert(rules.AlertKind.LOOP, reader.pk)
    Alert.objects.filter(pk=old.pk).update(last_at=timezone.now() - timedelta(hours=3))
    (new,) = raise_alert(rules.AlertKind.FAILURE_STREAK, reader.pk)
    since = (timezone.now() - timedelta(hours=1)).isoformat()
    assert listed(operator_api, since=since) == [new.pk]
    assert listed(operator_api) == [new.pk, old.pk]
    assert listed(operator_api, limit=1) == [new.pk]


def test_a_repeat_after_the_grouping_window_opens_a_new_alert(reader):
    (first,) = raise_alert(rules.AlertKind.LOOP, reader.pk, "first")
    (again,) = raise_alert(rules.AlertKind.LOOP, reader.pk, "again")
    assert again.pk == first.pk and again.count == 2 and again.message == "again"
    Alert.objects.filter(pk=first.pk).update(last_at=timezone.now() - timedelta(minutes=alerts.GROUP_MINUTES + 1))
    (later,) = raise_alert(rules.AlertKind.LOOP, reader.pk, "later")
    assert later.pk != first.pk and later.count == 1
    assert Alert.objects.get(pk=first.pk).count == 2


def test_a_repeat_counts_on_its_own_sessions_alert_and_rule_only(reader, make_session):
    other = make_session(title="other")
    (mine,) = raise_alert(rules.AlertKind.LOOP, reader.pk)
    (theirs,) = raise_alert(rules.AlertKind.LOOP, other.pk)
    (streak,) = raise_alert(rules.AlertKind.FAILURE_STREAK, reader.pk)
    assert len({mine.pk, theirs.pk, streak.pk}) == 3
    assert [Alert.objects.get(pk=pk).count for pk in (mine.pk, theirs.pk, streak.pk)] == [1, 1, 1]


def test_hooks_hear_of_a_cause_once_and_the_raise_links_its_attempts(operator_api, reader, monkeypatch,
                                                                    django_capture_on_commit_callbacks):
    Hook.objects.create(name="recorder", event="alert", kind="callable",
                        target="tests.compaction_app.api.test_alerts.record_alert")
    monkeypatch.setattr(alerts.background, "submit", lambda task, **kwargs: task(**kwargs))
    settings(failure_streak=1)
    Session.objects.filter(pk=reader.pk).update(fault_injection={"fault": "overloaded"})
    with django_capture_on_commit_callbacks(execute=True):
        first = compact(operator_api, reader)["error"]["attempt_id"]
    with django_capture_on_commit_callbacks(execute=True):
        second = compact(operator_api, reader)["error"]["attempt_id"]
    (alert,) = Alert.objects.filter(kind="failure_streak")
    assert alert.count == 2 and set(alert.attempts.values_list("pk", flat=True)) == {first, second}
    (sent,) = SENT
    assert (sent["alert_id"], sent["paused"], sent["trigger"]) == (alert.pk, False, "auto") and sent["message"]


def test_an_alert_hook_hears_the_alerts_detail(reader, monkeypatch, django_capture_on_commit_callbacks):
    Hook.objects.create(name="recorder", event="alert", kind="callable",
                        target="tests.compaction_app.api.test_alerts.record_alert")
    monkeypatch.setattr(alerts.background, "submit", lambda task, **kwargs: task(**kwargs))
    detail = {"count": 4, "minutes": 10}
    with django_capture_on_commit_callbacks(execute=True), transaction.atomic():
        (alert,) = alerts._raise([rules.Alert(kind=rules.AlertKind.STORM, message="m", detail=detail)],
                                 session_id=reader.pk, limits=alerts.thresholds())
    (sent,) = SENT
    assert (sent["alert_id"], sent["detail"]) == (alert.pk, detail)


def test_no_alert_hook_no_background_send(reader, monkeypatch, django_capture_on_commit_callbacks):
    submitted = []
    monkeypatch.setattr(alerts.background, "submit", lambda task, **kwargs: submitted.append(kwargs))
    Hook.objects.create(name="off", event="alert", kind="callable", enabled=False,
                        target="tests.compaction_app.api.test_alerts.record_alert")
    with django_capture_on_commit_callbacks(execute=True):
        raise_alert(rules.AlertKind.LOOP, reader.pk)
    assert submitted == []


@pytest.fixture
def pauses():
    asked: list[int] = []

    def pause(sender, session_id, **kwargs):
        asked.append(session_id)
        return True

    alerts.pause_requested.connect(pause)
    yield asked
    alerts.pause_requested.disconnect(pause)


def test_a_rule_pauses_its_session_only_when_the_settings_say_so(reader, pauses):
    settings(pause_on=["loop"])
    (streak,) = raise_alert(rules.AlertKind.FAILURE_STREAK, reader.pk)
    assert not streak.paused and pauses == []
    (loop,) = raise_alert(rules.AlertKind.LOOP, reader.pk)
    assert loop.paused and pauses == [reader.pk]
    assert Alert.objects.get(pk=loop.pk).paused


def test_a_pause_nobody_carried_out_is_not_reported(reader):
    settings(pause_on=["loop"])
    (loop,) = raise_alert(rules.AlertKind.LOOP, reader.pk)  # no simulator run behind the session
    assert not loop.paused


def test_a_fleet_storm_never_pauses_a_session(reader, pauses):
    settings(pause_on=["fleet_storm", "storm"])
    with transaction.atomic():
        (fleet,) = alerts._raise([rules.Alert(kind=rules.AlertKind.FLEET_STORM, message="fleet")],
                                 session_id=reader.pk, limits=alerts.thresholds())
    assert fleet.session_id is None and not fleet.paused and pauses == []


def test_the_live_card_of_a_session_shows_its_alerts_and_the_fleets_not_others_nor_acknowledged(
        reader, make_session):
    other = make_session(title="other")
    (mine,) = raise_alert(rules.AlertKind.LOOP, reader.pk)
    raise_alert(rules.AlertKind.LOOP, other.pk)
    (acked,) = raise_alert(rules.AlertKind.FAILURE_STREAK, reader.pk)
    alerts.do_acknowledge_alert(alert=acked, actor=None)
    with transaction.atomic():
        (fleet,) = alerts._raise([rules.Alert(kind=rules.AlertKind.FLEET_STORM, message="fleet")],
                                 session_id=reader.pk, limits=alerts.thresholds())
    assert {a.pk for a in alerts.recent_alerts(session_id=reader.pk)} == {mine.pk, fleet.pk}
    assert len(alerts.recent_alerts()) == 3 and len(alerts.recent_alerts(limit=2)) == 2


def test_the_live_card_shows_ten_alerts_read_in_four_queries(reader, make_session, django_assert_num_queries):
    """recent_alerts: the ten newest by default, each with its session, acknowledger, compactions and attempts read
    with it (the silences, the alerts with their joins, and one query each for compactions and attempts)."""
    sessions = [make_session(title=f"s{n}") for n in range(11)]
    for n, session in enumerate(sessions):
        raise_alert(rules.AlertKind.LOOP, session.pk, f"loop {n}")
    with django_assert_num_queries(4):
        shown = alerts.recent_alerts()
        described = [(a.session.title, a.acknowledged_by, list(a.compactions.all()), list(a.attempts.all()))
                     for a in shown]
    assert [title for title, *_ in described] == [f"s{n}" for n in range(10, 0, -1)]


def test_a_silence_needs_a_scope_and_keeps_its_reason_to_200_characters(operator_user, reader):
    with pytest.raises(ValueError):
        alerts.do_silence_alerts(kind="", session_id=None, minutes=None, actor=operator_user)
    silence = alerts.do_silence_alerts(kind="", session_id=reader.pk, minutes=None, actor=operator_user,
                                       reason="x" * 300)
    assert silence.reason == "x" * 200 and silence.until is None
    unexplained = alerts.do_silence_alerts(kind="loop", session_id=reader.pk, minutes=None, actor=operator_user)
    assert unexplained.reason == ""
    entry = AuditEntry.objects.filter(action=AuditEntry.Action.ALERT_SILENCE).order_by("pk").first()
    assert entry.detail == {"silence": silence.pk, "kind": "", "session": reader.pk, "until": None,
                            "set_by": operator_user.username}


def test_a_silence_whose_setter_was_removed_is_lifted_by_the_support_role_only(operator_user, support_user,
                                                                             make_user, reader):
    silence = alerts.do_silence_alerts(kind="loop", session_id=reader.pk, minutes=10, actor=operator_user)
    AlertSilence.objects.filter(pk=silence.pk).update(created_by=None)
    silence.refresh_from_db()
    with pytest.raises(alerts.SilenceNotAllowed, match="set by a removed user"):
        alerts.do_lift_silence(silence=silence, actor=operator_user)
    alerts.do_lift_silence(silence=silence, actor=support_user)
    assert not AlertSilence.objects.exists()
    lift = AuditEntry.objects.get(action=AuditEntry.Action.ALERT_SILENCE_LIFT)
    assert lift.detail["set_by"] == "a removed user" and lift.detail["until"] == silence.until.isoformat()


def test_a_turn_without_a_watch_or_items_reads_nothing(reader):
    assert alerts.record_turn(session_id=reader.pk, first_seq=1, last_seq=5) == []
    assert alerts.record_turn(session_id=reader.pk, first_seq=0, last_seq=0) == []


def test_a_turn_whose_watch_is_idle_or_that_added_no_items_costs_one_read(reader, django_assert_num_queries):
    """Most turns find an idle watch (or add no items): one plain read answers that, no write transaction."""
    SessionWatch.objects.create(session=reader, state=rules.Watch().to_json())  # no compaction watched
    with django_assert_num_queries(1):
        assert alerts.record_turn(session_id=reader.pk, first_seq=1, last_seq=5) == []
    SessionWatch.objects.filter(session=reader).update(state=rules.Watch(compaction_id=1, turns_left=3).to_json())
    with django_assert_num_queries(1):
        assert alerts.record_turn(session_id=reader.pk, first_seq=0, last_seq=0) == []


def test_setting_and_lifting_a_silence_tell_the_sessions_live_pages(operator_user, reader, monkeypatch,
                                                                    django_capture_on_commit_callbacks):
    told = []
    monkeypatch.setattr(alerts.events, "publish_alert_event", lambda **kwargs: told.append(kwargs))
    with django_capture_on_commit_callbacks(execute=True):
        silence = alerts.do_silence_alerts(kind="loop", session_id=reader.pk, minutes=5, actor=operator_user)
    with django_capture_on_commit_callbacks(execute=True):
        alerts.do_lift_silence(silence=silence, actor=operator_user)
    assert told == [{"session_id": reader.pk, "alert_id": 0}] * 2


def test_the_live_card_puts_the_cause_raised_last_first(reader, make_session):
    (older,) = raise_alert(rules.AlertKind.LOOP, reader.pk)
    (newer,) = raise_alert(rules.AlertKind.FAILURE_STREAK, reader.pk)
    raise_alert(rules.AlertKind.LOOP, reader.pk)  # the older cause raised again: now the latest
    assert [a.pk for a in alerts.recent_alerts(session_id=reader.pk)] == [older.pk, newer.pk]


def test_alert_hooks_run_within_the_deployments_hook_limits_and_a_failing_one_is_logged_not_raised(
        reader, monkeypatch, caplog):
    """The background send runs the alert hooks with the deployment's hook limits (settings_builder.
    hook_runner_limits, docs/security.md): a callable outside COMPACTWEB_HOOK_CALLABLE_PREFIXES is refused, and
    the refusal is logged, never raised."""
    from django.conf import settings as deployment

    Hook.objects.create(name="recorder", event="alert", kind="callable",
                        target="tests.compaction_app.api.test_alerts.record_alert")
    payload = {"hook_event_name": "Alert", "alert_id": 1, "kind": "loop", "message": "m", "session_id": reader.pk,
               "compaction_ids": [], "attempt_ids": [], "paused": False, "detail": {}}
    assert alerts.send_alert_task(payload=payload) == 1
    (sent,) = SENT
    assert sent["trigger"] == "auto" and sent["alert_id"] == 1
    SENT.clear()
    monkeypatch.setattr(deployment, "COMPACTWEB_HOOK_CALLABLE_PREFIXES", ["compactweb_hooks."])
    with caplog.at_level("WARNING", logger=alerts.logger.name):
        assert alerts.send_alert_task(payload=payload) == 1  # run, and failed: the refusal is its record
    assert SENT == []
    (logged,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("alert hook recorder failed: ")]
    assert "outside the allowed hook modules (compactweb_hooks.)" in logged


def test_a_silence_is_not_lifted_without_an_actor(operator_user, reader):
    """No actor (a call on nobody's behalf) neither set the silence nor holds the support role: refused, as any
    other stranger is, and the silence stays."""
    silence = alerts.do_silence_alerts(kind="loop", session_id=reader.pk, minutes=10, actor=operator_user)
    with pytest.raises(alerts.SilenceNotAllowed, match="only they or the support role"):
        alerts.do_lift_silence(silence=silence, actor=None)
    assert AlertSilence.objects.filter(pk=silence.pk).exists()


def test_the_rules_thresholds_are_the_alert_settings_as_saved(db):
    """Every threshold the rules read comes from the saved settings, none from the rules' own defaults."""
    from compaction_app.models import AlertSettings

    values = {"storm_count": 7, "storm_minutes": 13, "fleet_storm_count": 41, "fleet_storm_minutes": 17,
              "fleet_storm_per_session": 2.5, "loop_turns": 9, "reread_turns": 11, "reread_min_calls": 6,
              "reread_min_share": 0.6, "failure_streak": 8, "pause_on": ["loop", "storm"]}
    row = AlertSettings.current()
    for key, value in values.items():
        setattr(row, key, value)
    row.save()
    assert alerts.thresholds() == rules.Thresholds(**{**values, "pause_on": frozenset(values["pause_on"])})
    assert alerts.thresholds() != rules.Thresholds()


def test_a_silence_of_a_session_whose_id_is_past_32_bits_holds_its_alerts_back(reader):
    """Session ids are 64-bit: the silence's session is compared as one (on PostgreSQL a 32-bit comparison would
    find no session past 2**31 - 1, and the alert would be raised)."""
    import uuid

    big = Session.objects.get(pk=reader.pk)
    big.pk, big.thread_id = 2**31 + 7, uuid.uuid4()
    big.save(force_insert=True)
    AlertSilence.objects.create(kind="", session=big)
    assert alerts.is_silenced(kind="loop", session_id=big.pk)
    assert raise_alert(rules.AlertKind.LOOP, big.pk) == []
    assert not alerts.is_silenced(kind="loop", session_id=reader.pk)
