"""An append writes the session's header first, folded from the caller's copy and guarded by it: a current copy
costs no read, and a stale one (another writer, a rebuild, a rename) is read again under the lock, so the header
is never folded from old values and the copy is left as it was when the write fails."""

from __future__ import annotations

import pytest
from django.db import DatabaseError, connection
from django.db.models import F
from django.test.utils import CaptureQueriesContext

from sessions_app.models import RolloutLine, Session
from sessions_app.rollout import services
from sessions_app.rollout.services import NewLine, append_rollout_lines, rebuild_projection, verify_projection


def _statements(queries) -> list[str]:
    """The data statements an append ran (transaction control left out)."""
    verbs = [q["sql"].split(None, 1)[0].upper() for q in queries]
    return [v for v in verbs if v in ("SELECT", "INSERT", "UPDATE", "DELETE")]


def _line(items_factory, text: str) -> list[NewLine]:
    return [NewLine("response_item", items_factory.user(text))]


def test_an_append_from_a_current_copy_writes_the_header_and_its_rows_without_reading(session, items_factory):
    with CaptureQueriesContext(connection) as queries:
        append_rollout_lines(session=session, lines=_line(items_factory, "one"))
    assert _statements(queries.captured_queries) == ["UPDATE", "INSERT", "INSERT"]
    assert verify_projection(session=session) == []


def test_a_copy_another_writer_moved_past_is_read_again_and_its_lines_follow_the_newest(session, items_factory):
    stale = Session.objects.select_related("provider", "policy").get(pk=session.pk)
    append_rollout_lines(session=session, lines=_line(items_factory, "first writer"))

    with CaptureQueriesContext(connection) as queries:
        [row] = append_rollout_lines(session=stale, lines=_line(items_factory, "second writer"))

    # the guarded UPDATE matched nothing, then the lock read, the UPDATE and the rows
    assert _statements(queries.captured_queries) == ["UPDATE", "SELECT", "UPDATE", "INSERT", "INSERT"]
    assert row.seq == session.last_seq + 1 == stale.last_seq
    assert stale.live_item_count == session.live_item_count + 1
    assert verify_projection(session=stale) == []


def test_a_copy_read_before_a_rebuild_folds_from_the_rebuilt_header(session, items_factory):
    # A header gone wrong (the case a rebuild repairs), read by a caller before the repair: the rebuild changes no
    # `last_seq`, so only its `updated_at` tells the caller's copy is old.
    Session.objects.filter(pk=session.pk).update(meter_history_tokens=F("meter_history_tokens") + 999)
    stale = Session.objects.select_related("provider", "policy").get(pk=session.pk)
    rebuild_projection(session=Session.objects.get(pk=session.pk))

    append_rollout_lines(session=stale, lines=_line(items_factory, "after the repair"))

    assert verify_projection(session=stale) == []


def test_a_rename_or_a_state_change_made_without_an_append_reaches_the_copy(session, items_factory):
    Session.objects.filter(pk=session.pk).update(title="renamed", state=Session.State.FAILED)

    append_rollout_lines(session=session, lines=_line(items_factory, "hello"))

    assert (session.title, session.state) == ("renamed", Session.State.FAILED)


def test_a_failed_write_leaves_the_callers_copy_and_the_rollout_as_they_were(session, items_factory, monkeypatch):
    before = {name: getattr(session, name) for name in services.KNOWN_FIELDS}
    lines_before = RolloutLine.objects.filter(session=session).count()

    def refuse(*args, **kwargs):
        raise DatabaseError("disk full")

    monkeypatch.setattr(services._AppendStatements, "insert", refuse)
    with pytest.raises(DatabaseError, match="disk full"):
        append_rollout_lines(session=session, lines=_line(items_factory, "lost"))

    assert {name: getattr(session, name) for name in services.KNOWN_FIELDS} == before
    assert RolloutLine.objects.filter(session=session).count() == lines_before
    session.refresh_from_db()
    assert {name: getattr(session, name) for name in services.KNOWN_FIELDS} == before


def test_a_copy_missing_a_header_column_is_read_under_the_lock(session, items_factory):
    partial = Session.objects.defer("meter_history_tokens").select_related("provider", "policy").get(pk=session.pk)

    with CaptureQueriesContext(connection) as queries:
        append_rollout_lines(session=partial, lines=_line(items_factory, "hello"))

    assert _statements(queries.captured_queries)[:2] == ["SELECT", "UPDATE"]
    assert verify_projection(session=partial) == []
