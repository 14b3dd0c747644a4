"""Resume (spec §8.2): `verify_projections` rebuilds every session from its rollout alone, reports any difference
from the cached projection, and `--rebuild` repairs the cache."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from sessions_app.models import LiveItem, Session
from sessions_app.rollout.services import verify_projection


def test_all_sessions_equal_to_their_rollout_pass(make_session, add_turn, compact):
    one, two = make_session(), make_session()
    add_turn(one, 1)
    compact(one)
    add_turn(two, 1)
    out = StringIO()
    call_command("verify_projections", stdout=out)
    assert "2 session(s) checked, 0 differed" in out.getvalue()


def test_a_corrupted_cache_is_reported_with_a_non_zero_exit_and_repaired_by_rebuild(make_session, add_turn):
    good, bad = make_session(), make_session()
    add_turn(good, 1)
    add_turn(bad, 1)
    LiveItem.objects.filter(session=bad, position=0).update(item={"type": "message", "role": "user", "content": []})
    Session.objects.filter(pk=bad.pk).update(window_number=7)

    out = StringIO()
    with pytest.raises(CommandError, match="1 session\\(s\\) differ"):
        call_command("verify_projections", stdout=out)
    report = out.getvalue()
    assert f"session {bad.pk}: 2 difference(s)" in report
    assert "header.window_number: cached 7 != rebuilt 0" in report
    assert "live item 0" in report
    assert f"session {good.pk}" not in report.replace(f"session {bad.pk}", "")

    out = StringIO()
    call_command("verify_projections", "--rebuild", stdout=out)
    assert "rebuilt from the rollout: now equal" in out.getvalue()
    assert verify_projection(session=bad) == []
    call_command("verify_projections", stdout=StringIO())  # clean again: no error
