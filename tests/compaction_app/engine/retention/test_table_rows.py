"""A table row is one thing (issue 46, round seven): each of its cells is a fact, and a summary that states most of
the row (more than half of its name and values, the row named) keeps every cell; one that states a single cell of a
wide row keeps that cell only. Tables are read whether their cells are two spaces apart, a tab apart (`helm list`)
or drawn with bars (psql), and rows whose first cell repeats (`docker images`) are told apart by their first two
cells. Each test scores a history and a summary through `score_compaction` and asks what it says of the facts of one
row."""

from __future__ import annotations

import pytest

from compaction_app.engine.retention.facts import FactKind
from tests.compaction_app.engine.retention.test_round_four_rules import kept
from tests.compaction_app.engine.retention.test_stated_values import output

HPA = output("kubectl get hpa api-7 -n shop",
             "NAME    REFERENCE            TARGETS         MINPODS   MAXPODS   REPLICAS   AGE\n"
             "api-7   Deployment/api-7     cpu: 64%/75%    3         12        5          9d")


@pytest.mark.parametrize(("claim", "held"), [
    ("- api-7 scales on CPU at 75%, from 3 to 12 pods", True),
    ("- api-7 runs 5 pods at 64% CPU against 75%, between 3 and 12", True),
    ("- api-7 scales on CPU at 75%, from 3 to 16 pods", False),
    ("- api-7 has an autoscaler", False),
])
def test_a_row_mostly_stated_keeps_every_cell(claim, held):
    assert kept(HPA, claim, FactKind.VALUE, "MAXPODS") is held
    assert kept(HPA, claim, FactKind.VALUE, "AGE") is held


DF = output("df -h /srv/queue-4", "Filesystem      Size  Used Avail Use% Mounted on\n"
                                  "/dev/sdb1       200G  150G   50G  75% /srv/queue-4")


@pytest.mark.parametrize(("claim", "held"), [
    ("- /srv/queue-4 is 75% full, 50 GiB left", True),  # named by the folder df was asked about
    ("- /srv/queue-4 is 57% full, 50 GiB left", False),
])
def test_a_row_named_by_what_the_table_was_read_from(claim, held):
    assert kept(DF, claim, FactKind.VALUE, "Size") is held


STATS = output("docker stats --no-stream web-3", "CONTAINER ID   NAME    CPU %    MEM USAGE / LIMIT    MEM %    NET I/O\n"
                                               "9c1d2e3f4a5b   web-3   3.10%    420.5MiB / 2GiB      20.53%   4MB / 1MB")


def test_a_single_cell_of_a_wide_row_keeps_that_cell_only():
    claim = "- web-3 uses 420 MiB of memory"
    assert kept(STATS, claim, FactKind.VALUE, "420.5MiB") is True
    assert kept(STATS, claim, FactKind.VALUE, "3.10%") is False


PSQL = output("psql -d shop -c 'SELECT state, count(*) FROM jobs_9 GROUP BY state'",
              "  state  | count\n---------+-------\n done    | 80411\n failed  |  2307\n(2 rows)")


@pytest.mark.parametrize(("claim", "held"), [
    ("- jobs_9: 2,307 jobs failed", True),
    ("- jobs_9: 80411 failed", False),
])
def test_a_table_drawn_with_bars_is_read_row_by_row(claim, held):
    assert kept(PSQL, claim, FactKind.VALUE, "failed count") is held


IMAGES = output("docker images shop-api", "REPOSITORY   TAG      IMAGE ID       CREATED       SIZE\n"
                                          "shop-api     2.4.1    7e1f00c2a9d3   2 hours ago   512MB\n"
                                          "shop-api     2.4.0    0b9e5d6c7f81   3 days ago    498MB")
HELM = output("helm list -n shop --filter cart-5",
              "NAME  \tNAMESPACE\tREVISION\tUPDATED                     \tSTATUS  \tCHART       \tAPP VERSION\n"
              "cart-5\tshop     \t12      \t2026-12-01 09:14:55 +0000 UTC\tdeployed\tcart-1.8.2  \t3.1.0")


@pytest.mark.parametrize(("history", "tag", "claim", "held"), [
    (IMAGES, "512MB", "- the shop-api:2.4.1 image is 512 MB", True),
    (IMAGES, "512MB", "- the shop-api:2.4.1 image is 498 MB", False),
    (HELM, "REVISION", "- cart-5 runs chart cart-1.8.2, revision 12", True),
    (HELM, "REVISION", "- cart-5 runs chart cart-1.8.2, revision 13", False),
])
def test_tables_of_repeated_names_and_of_tabs_are_read(history, tag, claim, held):
    assert kept(history, claim, FactKind.VALUE, tag) is held
