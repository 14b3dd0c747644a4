"""match.py: whether a summary's segment states a fact, read through `score_compaction`. Written from the survivors
of the retention room's mutation samples (issue 43); each test fails with its mutant planted."""

from __future__ import annotations

import pytest

from compaction_app.engine.retention.facts import FactKind
from tests.compaction_app.engine.retention.labelled_set import exec_out, fcall, fout
from tests.compaction_app.engine.retention.test_round_four_rules import kept
from tests.compaction_app.engine.retention.test_stated_values import output

DEPLOYMENTS = output("kubectl get deployments -n shop", "NAME        READY   UP-TO-DATE   AVAILABLE   AGE\n"
                                                        "reconciler  2/2     2            2           12d")


@pytest.mark.parametrize(("claim", "held"), [
    ("- the reconciler deployment: 2/2 ready, 2 up to date, 2 available", True),
    ("- reconcilers: 2/2 ready, 2 up to date, 2 available", True),
    ("- the reconciling deployment: 2/2 ready, 2 up to date, 2 available", True),
    ("- the deployment: 2/2 ready, 2 up to date, 2 available", False),
])
def test_a_row_is_named_by_its_name_in_another_inflection(claim, held):
    # The row stated but for its age: kept only when the claim names the row.
    assert kept(DEPLOYMENTS, claim, FactKind.VALUE, "AGE") is held


READ = [fcall("r", "exec_command", cmd="sed -n 200,220p billing/totals.py"),
        fout("r", exec_out(0, "    return amount.quantize(CENT)"))]


@pytest.mark.parametrize(("claim", "held"), [
    ("- read src/billing/totals.py:212, which rounds half up", True),
    ("- src/billing/totals.py rounds half up", True),
    ("- read src/billing/ledger.py:212", False),
])
def test_a_place_names_its_file_by_any_tail_of_its_path(claim, held):
    assert kept(READ, claim, FactKind.FILE_READ, "totals.py") is held
