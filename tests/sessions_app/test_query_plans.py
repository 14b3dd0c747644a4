"""The hot pages and API lists read the big tables through indexes (issue 34: a year of history): every query the
public path runs is EXPLAINed on PostgreSQL over a seeded year in small (sessions over a year, a long session with
its live history, compactions and attempts), and none scans a big table sequentially, nor walks a long session's
whole rollout to keep a few of its lines.

PostgreSQL's planner decides by the statistics, so the tables are seeded to a size where a scan would be its honest
choice without an index (tens of thousands of rows) and ANALYZEd. The SQLite pass skips with that reason.
"""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from bench.year_data import seed_year

pytestmark = [pytest.mark.services, pytest.mark.django_db]

# The tables that grow with history (10M rollout lines, 200k compactions a year). Sessions grow too, but slower, and
# three whole-fleet aggregates read them whole by design (the fleet's counts by state and its kinds, the analytics by
# policy and model joining the period's compactions to their sessions): every *list* of sessions must page by
# index all the same, checked with the sessions table included.
HISTORY_TABLES = ("sessions_app_rolloutline", "sessions_app_liveitem", "compaction_app_compaction",
                  "compaction_app_compactionattempt")
SESSIONS_TABLE = "sessions_app_session"
SEQ_SCAN = re.compile(r"Seq Scan on (\w+)")


def _postgresql_only() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("query plans are PostgreSQL's: checked in the PostgreSQL pass (DATABASE_URL=postgres://...)")


@pytest.fixture
def year(db):
    _postgresql_only()
    return seed_year(sessions=8_000, lines_per_session=10, long_lines=20_000, compactions=6_000)


# A hot query may discard what an index range brings it (a kind it does not want), but not a long session's whole
# rollout: the long session has 20,000 lines, so a read that walks all of them and keeps a few fails here.
MAX_DISCARDED = 10_000
DISCARDED = re.compile(r"Rows Removed by Filter: (\d+)")


def scans(path: str, client, tables: tuple[str, ...]) -> list[tuple[str, str]]:
    """(what, query) of each sequential scan of one of `tables`, and of each plan node discarding more than
    MAX_DISCARDED rows, in the executed plans (EXPLAIN ANALYZE) of the queries `path` runs."""
    with CaptureQueriesContext(connection) as captured:
        response = client.get(path)
        assert response.status_code == 200, (path, response.status_code)
        if hasattr(response, "streaming_content"):
            b"".join(response.streaming_content)
    found = []
    with connection.cursor() as cursor:
        for query in captured.captured_queries:
            sql = query["sql"]
            if not sql.lstrip().upper().startswith("SELECT"):
                continue
            cursor.execute(f"EXPLAIN ANALYZE {sql}")
            plan = "\n".join(row[0] for row in cursor.fetchall())
            found += [(table, sql[:300]) for table in SEQ_SCAN.findall(plan) if table in tables]
            found += [(f"{n} rows discarded", sql[:300]) for n in DISCARDED.findall(plan) if int(n) > MAX_DISCARDED]
    return found


@pytest.fixture
def clients(operator_user, support_user):
    operator, support = APIClient(), APIClient()
    operator.force_login(operator_user)
    support.force_login(support_user)
    return operator, support


def test_every_hot_page_and_api_list_reads_the_history_tables_through_indexes(year, clients):
    operator, support = clients
    long, middle = year.long_session, year.session_ids[len(year.session_ids) // 2]
    compaction = year.compaction_ids[len(year.compaction_ids) // 2]
    paths = [
        f"/api/v1/sessions/{long}",
        f"/api/v1/sessions/{long}/history?limit=200",
        f"/api/v1/sessions/{long}/history?after=10000&limit=200",
        f"/api/v1/sessions/{middle}/compactions",
        f"/api/v1/sessions/{middle}/attempts",
        f"/api/v1/compactions/{compaction}",
        f"/sessions/{long}/",  # the session page of the long session
        f"/sessions/{long}/history/?before=10000",  # its "show older" page
        f"/compactions/{compaction}/",  # the inspector
        "/analytics/",  # the last 30 days (the page's default)
        "/analytics/?period=7",
        "/analytics/?period=",  # all time: the roll-up, whatever the history
        "/api/v1/analytics?period=",
        "/",  # the fleet board (each row's last attempt)
    ]
    found = {path: scans(path, support if path.startswith("/compactions/") else operator, HISTORY_TABLES)
             for path in paths}
    assert {path: tables for path, tables in found.items() if tables} == {}


def test_every_list_of_sessions_pages_through_an_index(year, clients):
    operator, _ = clients
    middle = year.session_ids[len(year.session_ids) // 2]
    lists = [
        "/api/v1/sessions",  # the newest page
        f"/api/v1/sessions?before={middle}&limit=100",  # a keyset page half a year back
        "/api/v1/sessions?state=running&limit=100",
    ]
    found = {path: scans(path, operator, (SESSIONS_TABLE, *HISTORY_TABLES)) for path in lists}
    assert {path: tables for path, tables in found.items() if tables} == {}


def test_every_page_of_archives_reads_through_an_index(db, admin_user_role):
    """GET /api/v1/archives over a year of archive records (retention keeps one per archived session, for good):
    the newest page and a keyset page half a year back read the (archived_at, id) index."""
    _postgresql_only()
    import uuid
    from datetime import timedelta

    from django.utils import timezone

    from sessions_app.models import SessionArchive

    start = timezone.now() - timedelta(days=365)
    SessionArchive.objects.bulk_create(
        (
            SessionArchive(
                session_id=n,
                thread_id=uuid.uuid4(),
                title=f"s{n}",
                source="api",
                session_created_at=start,
                last_activity_at=start,
                file_name=f"f/{n}.jsonl.gz",
                export_name=f"{n}.jsonl",
                sha256="0" * 64,
                file_lines=1,
                export_bytes=1,
                compressed_bytes=1,
                rollout_lines=1,
                last_seq=1,
                archived_at=start + timedelta(minutes=20 * n),
                archived_by="test",
            )
            for n in range(1, 25_001)
        ),
        batch_size=5000,
    )
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {SessionArchive._meta.db_table}")
    middle = SessionArchive.objects.order_by("pk").values_list("pk", flat=True)[12_500]
    admin = APIClient()
    admin.force_login(admin_user_role)
    lists = ["/api/v1/archives", f"/api/v1/archives?before={middle}&limit=100"]
    found = {path: scans(path, admin, (SessionArchive._meta.db_table,)) for path in lists}
    assert {path: tables for path, tables in found.items() if tables} == {}
