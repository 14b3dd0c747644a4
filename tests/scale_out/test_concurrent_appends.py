"""Ten appends to one session at the same moment on PostgreSQL, each from a copy of the session read before any
of them: each guarded header write but the first finds its copy stale, reads the header under the row lock and
folds again, so all ten are stored, one seq each, and the header still equals its rebuild."""

from __future__ import annotations

import pytest

from sessions_app.models import RolloutLine, Session
from sessions_app.rollout.services import NewLine, append_rollout_lines, verify_projection
from tests.scale_out.at_once import AtOnce

WRITERS = 10


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_ten_appends_from_stale_copies_at_once_are_all_stored_in_order(on_postgresql, make_session, items_factory):
    session = make_session()
    copies = iter([Session.objects.select_related("provider", "policy").get(pk=session.pk) for _ in range(WRITERS)])
    texts = iter([f"writer {n}" for n in range(WRITERS)])

    def append():
        copy, text = next(copies), next(texts)
        return append_rollout_lines(session=copy, lines=[NewLine("response_item", items_factory.user(text))])[0]

    results = AtOnce(WRITERS, append).start().join(60)

    assert all(isinstance(r, RolloutLine) for r in results), results
    assert sorted(r.seq for r in results) == list(range(session.last_seq + 1, session.last_seq + 1 + WRITERS))
    session.refresh_from_db()
    assert session.last_seq == max(r.seq for r in results)
    assert session.live_item_count == WRITERS
    assert verify_projection(session=session) == []
