"""Statements written once (compactweb.statements): they write and read rows exactly as the ORM does."""

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from compactweb import statements
from sessions_app.models import RolloutLine, Session, SimulatorRun

pytestmark = pytest.mark.django_db

SAVE = statements.Update(SimulatorRun, set=("state", "last_error", "next_step_at", "loop"), add=("steps_done",),
                         where=("pk",))
BY_SESSION = statements.Select(SimulatorRun, where=("session",))


@pytest.fixture
def run(session):
    return SimulatorRun.objects.create(session=session, scenario="many-short-turns", state={"position": 1})


def _row(pk):
    return SimulatorRun.objects.values("state", "last_error", "next_step_at", "loop", "steps_done").get(pk=pk)


def test_an_update_writes_json_datetimes_and_booleans_as_a_queryset_update_does(run, make_session):
    at = timezone.now() + timedelta(seconds=5)
    state = {"position": 2, "nested": {"é": [1, 2.5, None, True]}}
    other = SimulatorRun.objects.create(session=make_session(title="other"), scenario="x")

    assert SAVE.run(values=(state, "boom", at, True), add=(1,), where=(run.pk,)) == 1
    SimulatorRun.objects.filter(pk=other.pk).update(state=state, last_error="boom", next_step_at=at, loop=True,
                                                    steps_done=1)

    assert _row(run.pk) == _row(other.pk) == {"state": state, "last_error": "boom", "next_step_at": at,
                                              "loop": True, "steps_done": 1}


def test_an_update_adds_to_a_column_and_says_how_many_rows_it_changed(run):
    SAVE.run(values=({}, "", None, False), add=(2,), where=(run.pk,))
    SAVE.run(values=({}, "", None, False), add=(3,), where=(run.pk,))
    assert _row(run.pk)["steps_done"] == 5
    assert SAVE.run(values=({}, "", None, False), add=(1,), where=(run.pk + 1000,)) == 0


def test_an_update_changes_only_the_rows_every_lookup_matches(run):
    claim = statements.Update(SimulatorRun, set=("next_step_at",), where=("pk", "status", "next_step_at__lte"))
    now = timezone.now()
    SimulatorRun.objects.filter(pk=run.pk).update(next_step_at=now)

    assert claim.run(values=(now + timedelta(minutes=2),), where=(run.pk, SimulatorRun.Status.PAUSED, now)) == 0
    assert claim.run(values=(now + timedelta(minutes=2),),
                     where=(run.pk, SimulatorRun.Status.RUNNING, now - timedelta(seconds=1))) == 0
    assert claim.run(values=(now + timedelta(minutes=2),), where=(run.pk, SimulatorRun.Status.RUNNING, now)) == 1
    assert _row(run.pk)["next_step_at"] == now + timedelta(minutes=2)


def test_a_get_builds_the_instance_a_queryset_get_builds(run, session):
    SimulatorRun.objects.filter(pk=run.pk).update(next_step_at=timezone.now(), loop=True)

    read, orm = BY_SESSION.get(where=(session.pk,)), SimulatorRun.objects.get(session=session)

    fields = [f.attname for f in SimulatorRun._meta.concrete_fields]
    assert [getattr(read, f) for f in fields] == [getattr(orm, f) for f in fields]
    assert read.state == {"position": 1} and read.loop is True and read.next_step_at.tzinfo is not None
    assert (read._state.adding, read._state.db) == (False, "default")


def test_a_get_of_no_row_raises_the_models_does_not_exist(session):
    with pytest.raises(SimulatorRun.DoesNotExist):
        BY_SESSION.get(where=(session.pk,))


def test_values_reads_the_columns_converted_or_none_without_a_row(run, session):
    read = statements.Select(SimulatorRun, columns=("state", "loop", "created_at"), where=("session",))
    state, loop, created_at = read.values(where=(session.pk,))
    assert (state, loop, created_at) == (run.state, run.loop, run.created_at)
    assert read.values(where=(session.pk + 1000,)) is None


def test_exists_answers_for_a_comparison(run, session):
    after = statements.Select(SimulatorRun, columns=(), where=("session", "created_at__gte"))
    assert after.exists(where=(session.pk, run.created_at))
    assert not after.exists(where=(session.pk, run.created_at + timedelta(microseconds=1)))


def test_all_builds_every_matching_instance_and_none_of_the_others(run, make_session):
    other = SimulatorRun.objects.create(session=make_session(title="other"), scenario="many-short-turns")
    SimulatorRun.objects.create(session=make_session(title="third"), scenario="long-tool-loop")
    by_scenario = statements.Select(SimulatorRun, where=("scenario",))

    read = sorted(by_scenario.all(where=("many-short-turns",)), key=lambda r: r.pk)

    assert [(r.pk, r.state, r._state.adding) for r in read] == [(run.pk, run.state, False), (other.pk, {}, False)]
    assert by_scenario.all(where=("no-such-scenario",)) == []


def test_all_orders_by_the_given_fields(make_session):
    runs = [SimulatorRun.objects.create(session=make_session(title=f"s{i}"), scenario="x", steps_done=n)
            for i, n in enumerate((3, 1, 2))]
    by_steps = statements.Select(SimulatorRun, where=("scenario",), order_by=("steps_done",))
    assert [r.pk for r in by_steps.all(where=("x",))] == [runs[1].pk, runs[2].pk, runs[0].pk]


def test_every_statement_goes_through_djangos_cursor(run, session, django_assert_num_queries):
    with django_assert_num_queries(3):
        BY_SESSION.get(where=(session.pk,))
        SAVE.run(values=({}, "", None, False), add=(1,), where=(run.pk,))
        statements.Select(Session, columns=(), where=("pk",)).exists(where=(session.pk,))


def test_a_memo_adapts_a_shared_datetime_once_and_keeps_other_kinds_to_their_own_field(monkeypatch):
    from django.db import connection
    from django.db.models import DateTimeField

    adapted = []
    real = DateTimeField.get_db_prep_save
    monkeypatch.setattr(DateTimeField, "get_db_prep_save",
                        lambda self, value, conn: adapted.append(self) or real(self, value, conn))
    at, memo = timezone.now(), {}
    times = [SimulatorRun._meta.get_field("next_step_at"), Session._meta.get_field("updated_at")]
    first, second = statements.prep_save(times, [at, at], connection, memo=memo)
    assert first == second == real(times[0], at, connection) and len(adapted) == 1

    thread, value = Session._meta.get_field("thread_id"), uuid.uuid4()
    statements.prep_save([thread], [value], connection, memo=memo)
    assert (id(value), id(thread)) in memo  # a kind not shared is adapted by its own field


@pytest.mark.parametrize(("model", "name", "value"), [
    (SimulatorRun, "loop", True), (SimulatorRun, "loop", False), (Session, "reference_context_set", True),
    (Session, "meter_reasoning_included", False), (RolloutLine, "item_tokens", None), (SimulatorRun, "state", None),
])
def test_a_boolean_and_a_json_fields_none_are_written_as_the_field_itself_would_write_them(model, name, value):
    from django.db import connection

    field = model._meta.get_field(name)
    [adapted] = statements.prep_save([field], [value], connection, memo={})
    assert adapted is field.get_db_prep_save(value, connection)
