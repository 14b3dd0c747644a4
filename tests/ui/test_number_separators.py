"""Numbers read with thousands separators (issue 47, item 7): the replay comparison's figures, the pin budget and
the fleet header's counts."""

from __future__ import annotations

import re

import pytest
from django.template.loader import render_to_string

FIGURES = {"compactions": 12, "peak_tokens": 266516, "tokens_saved": 5351867, "final_tokens": 699842,
           "failed_compactions": 0}


def test_the_replay_comparison_shows_its_figures_with_separators():
    comparison = {"original": {"session": 1, "policy": "a", "provider": "p", **FIGURES},
                  "replay": {"session": 2, "policy": "b", "provider": "p", **FIGURES, "peak_tokens": 1234},
                  "difference": {"compactions": 0, "peak_tokens": -265282, "tokens_saved": 0, "final_tokens": 0},
                  "failed": False}
    html = render_to_string("sessions_app/partials/replay_table.html", {"comparison": comparison})
    for shown in ("266,516", "5,351,867", "699,842", "1,234", "-265,282"):
        assert f'<td class="num">{shown}</td>' in html
    assert "266516" not in html


def test_the_pin_budget_shows_separators():
    html = render_to_string("compaction_app/partials/pins.html",
                            {"pin_budget": {"used": 1200, "budget": 3040, "source": "policy"}, "pins": []})
    assert "1,200 of 3,040 tokens" in re.sub(r"<[^>]+>", "", html)  # the budget is a live span of its own


@pytest.mark.django_db
def test_the_fleet_header_counts_show_separators(operator_user, make_session, monkeypatch):
    from sessions_app.live import selectors as ls
    from tests.ui.test_live_pages import login

    make_session(title="one")
    monkeypatch.setattr(ls, "fleet_counts", lambda **_: {"total": 12345, "matching": 1234,
                                                         "by_state": {"idle": 12345}})
    body = login(operator_user).get("/?q=one").content.decode()
    assert "12,345 sessions" in body and "12,345 idle" in body and "1,234 matching the filter" in body
