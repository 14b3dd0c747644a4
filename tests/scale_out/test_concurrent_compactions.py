"""20 compaction requests for one session at the same moment on PostgreSQL (issue 8): exactly one compaction is
installed, the 19 others are refused with SessionBusy saying why, and the history still equals its rebuild."""

from __future__ import annotations

import pytest

from compaction_app.engine.items import user_message
from compaction_app.models import Compaction, CompactionAttempt
from sessions_app.compactions.services import do_compact_session
from sessions_app.models import RolloutLine, Session
from sessions_app.rollout.lease import SessionBusy
from sessions_app.rollout.services import verify_projection
from tests.scale_out.at_once import AtOnce

REQUESTS = 20
# The winner holds the lease for at least this long (the simulated model's delay): far longer than the 19 others
# need to try, with their database connections opened before the start line.
SLOW_SECONDS = 2


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_twenty_concurrent_compactions_install_exactly_one_and_refuse_the_rest(on_postgresql, make_session):
    session = make_session(items=[user_message("summarize the incident report"), user_message("and the fix")])
    Session.objects.filter(pk=session.pk).update(fault_injection={"fault": f"slow={SLOW_SECONDS}"})
    lines_before = RolloutLine.objects.filter(session=session).count()
    results = AtOnce(REQUESTS, lambda: do_compact_session(session_id=session.pk, strategy="local")).start().join(60)

    installed = [r for r in results if isinstance(r, Compaction)]
    refused = [r for r in results if isinstance(r, SessionBusy)]
    assert len(installed) == 1, results
    assert len(refused) == REQUESTS - 1, [r for r in results if not isinstance(r, Compaction | SessionBusy)]
    assert {str(r) for r in refused} == {
        f"session {session.pk} is busy: a compaction is running; try again when it ends"}
    assert Compaction.objects.filter(session=session).count() == 1
    assert list(CompactionAttempt.objects.filter(session=session).values_list("status", flat=True)) == ["completed"]
    # one `compacted` line (plus its event lines) was appended, once
    assert RolloutLine.objects.filter(session=session, kind="compacted").count() == 1
    assert RolloutLine.objects.filter(session=session).count() > lines_before
    session.refresh_from_db()
    assert session.lease_holder == ""
    assert verify_projection(session=session) == []
