"""The net's formula is words for a reader (the inspector shows it under the net): its figures are written with
thousands separators like every other count on the pages (issue 47 item 7: `34874 freed × 32 request(s)`)."""

from __future__ import annotations

from types import SimpleNamespace

from sessions_app.compactions.roi import _figures


def test_the_net_formula_writes_its_figures_with_thousands_separators():
    compaction = SimpleNamespace(tokens_freed=34_874, call_tokens=36_700, probe_tokens=1_250, reread_tokens=9_479)
    figures = _figures(compaction, 32, None)
    assert figures["net_tokens"] == 1_068_539  # the number itself stays a number
    assert figures["net_formula"] == (
        "34,874 freed × 32 request(s) − 36,700 call − 1,250 probes − 9,479 re-read = 1,068,539")
