"""Rollout lines are append-only: every ORM path and raw SQL UPDATE/DELETE is refused (design: rollout is truth)."""

import pytest
from django.db import DatabaseError, IntegrityError, connection, transaction
from django.db.models.deletion import ProtectedError

from sessions_app.models import AppendOnlyError, RolloutLine, Session
from sessions_app.rollout.services import do_append_items


@pytest.fixture
def line(session, items_factory):
    do_append_items(session=session, items=[items_factory.user("hello")])
    return RolloutLine.objects.filter(session=session).order_by("-seq").first()


def _snapshot(session):
    return list(RolloutLine.objects.filter(session=session).order_by("seq").values_list("seq", "kind", "payload", "tokens"))


def test_saving_an_existing_line_again_is_refused(line):
    before = _snapshot(line.session)
    line.payload = {"type": "message", "role": "user", "content": []}
    with pytest.raises(AppendOnlyError):
        line.save()
    with pytest.raises(AppendOnlyError):
        line.save(update_fields=["payload"])
    assert _snapshot(line.session) == before


def test_queryset_update_is_refused(line):
    before = _snapshot(line.session)
    with pytest.raises(AppendOnlyError):
        RolloutLine.objects.filter(pk=line.pk).update(tokens=0)
    with pytest.raises(AppendOnlyError):
        RolloutLine.objects.update_or_create(pk=line.pk, defaults={"tokens": 0})
    assert _snapshot(line.session) == before


def test_instance_and_queryset_delete_are_refused(line):
    before = _snapshot(line.session)
    with pytest.raises(AppendOnlyError):
        line.delete()
    with pytest.raises(AppendOnlyError):
        RolloutLine.objects.filter(session=line.session).delete()
    with pytest.raises(AppendOnlyError):
        RolloutLine.objects.all().delete()
    assert _snapshot(line.session) == before


def test_bulk_update_is_refused(line):
    before = _snapshot(line.session)
    line.tokens = 0
    with pytest.raises(AppendOnlyError):
        RolloutLine.objects.bulk_update([line], ["tokens"])
    assert _snapshot(line.session) == before


def test_raw_sql_update_is_refused_by_the_database_trigger(line):
    before = _snapshot(line.session)
    with pytest.raises(DatabaseError, match="append-only"):
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("UPDATE sessions_app_rolloutline SET tokens = 0 WHERE id = %s", [line.pk])
    assert _snapshot(line.session) == before


def test_raw_sql_delete_is_refused_by_the_database_trigger(line):
    before = _snapshot(line.session)
    with pytest.raises(DatabaseError, match="append-only"):
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("DELETE FROM sessions_app_rolloutline WHERE session_id = %s", [line.session_id])
    assert _snapshot(line.session) == before


def test_raw_sql_truncate_is_refused_on_postgresql(line):
    if connection.vendor != "postgresql":
        pytest.skip("TRUNCATE exists only on PostgreSQL; SQLite's DELETE path is covered above")
    before = _snapshot(line.session)
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # flush the test transaction's deferred FK checks first
    with pytest.raises(DatabaseError, match="append-only"):
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("TRUNCATE sessions_app_rolloutline CASCADE")
    assert _snapshot(line.session) == before


def test_a_session_with_rollout_lines_cannot_be_deleted(line):
    with pytest.raises(ProtectedError):
        Session.objects.filter(pk=line.session_id).delete()
    assert Session.objects.filter(pk=line.session_id).exists()


def test_a_duplicate_seq_is_refused(line):
    with pytest.raises(IntegrityError):
        with transaction.atomic():
            RolloutLine.objects.create(
                session=line.session, seq=line.seq, timestamp=line.timestamp, kind="event_msg", payload={}
            )


def test_new_lines_can_still_be_appended(line, items_factory):
    do_append_items(session=line.session, items=[items_factory.user("again")])
    assert RolloutLine.objects.filter(session=line.session).count() == line.seq + 1
