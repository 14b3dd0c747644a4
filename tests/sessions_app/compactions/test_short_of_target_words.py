"""A compaction that left more history than its target allows says so in words a reader can take in: the method
as its label and the counts with thousands separators (issue 47 item 7; the gateway's 400 and the attempt's error
carry this text)."""

from __future__ import annotations

from types import SimpleNamespace

from compaction_app.engine.items import user_message
from compaction_app.engine.vocabulary import Strategy
from sessions_app.compactions.services import _short_of_target


def test_a_compaction_short_of_its_target_is_refused_in_words():
    plan = SimpleNamespace(strategy=Strategy.TOKEN_BUDGET, settings=SimpleNamespace(token_counter="o200k_base"))
    outcome = SimpleNamespace(replacement_history=[user_message("parser " * 3_000)])
    refusal = _short_of_target(plan, outcome, 1_200)
    assert refusal.startswith("new window (token budget) left ") and "token_budget" not in refusal, refusal
    assert refusal.endswith("tokens of history, more than the 1,200 allowed; nothing was installed"), refusal
    left = refusal.removeprefix("new window (token budget) left ").split(" tokens")[0]
    assert "," in left and int(left.replace(",", "")) > 1_200
    assert _short_of_target(plan, outcome, 10**9) == ""
