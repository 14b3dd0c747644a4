"""Issue 14: the application's PostgreSQL role (manage.py create_app_role) may SELECT and INSERT rollout lines but
cannot UPDATE, DELETE or TRUNCATE them, disable or drop the append-only triggers, or change the schema; the
application itself works under it (setup_demo writes sessions and their rollouts).

Service-backed: a scratch database and a throwaway role on the PostgreSQL server. Costs about 25 s (a migrate and
three management commands in subprocesses)."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest
from psycopg import errors, sql

REPO = Path(__file__).resolve().parents[2]
ROLLOUT = "sessions_app_rolloutline"


def _manage(*args: str, database_url: str, tmp_path: Path) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "CELERY_BROKER_URL")}
    env.update(DATABASE_URL=database_url, COMPACTWEB_VAR_DIR=str(tmp_path / "var"), COMPACTWEB_RUN_SIMULATOR="0")
    result = subprocess.run([sys.executable, "manage.py", *args], cwd=REPO, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def tmp_path(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("approle")


@pytest.fixture(scope="module")
def scratch(tmp_path, postgres_url):
    """(owner URL, app-role URL, role) on a freshly migrated scratch database with the app role created; one per
    module, as the migrate is the slow part."""
    parts = urlsplit(postgres_url)
    suffix = secrets.token_hex(4)  # runs in parallel (several checkouts, one server) never share a database
    name = f"test_{parts.path.lstrip('/') or 'compactweb'}_approle_{suffix}"[:63]
    role = os.environ.get("COMPACTWEB_TEST_ROLE_PREFIX", "compactweb_test_") + "app_" + suffix
    admin_url = parts._replace(path="/postgres").geturl()
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    owner_url = parts._replace(path=f"/{name}").geturl()
    try:
        _manage("migrate", "-v", "0", database_url=owner_url, tmp_path=tmp_path)
        app_url = _manage("create_app_role", "--role", role, "--password-file", str(tmp_path / "pw"), "--print-url",
                          database_url=owner_url, tmp_path=tmp_path).strip().splitlines()[-1]
        yield owner_url, app_url, role
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
            admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


@pytest.mark.services
def test_the_app_role_appends_but_cannot_rewrite_or_unguard_the_rollout(scratch, tmp_path):
    owner_url, app_url, role = scratch
    assert urlsplit(app_url).username == role

    # The application runs under the role: setup_demo creates sessions and appends their rollout lines.
    _manage("setup_demo", database_url=app_url, tmp_path=tmp_path)
    with psycopg.connect(app_url, autocommit=True) as app:
        assert app.execute(f"SELECT count(*) FROM {ROLLOUT}").fetchone()[0] > 0
        privileges = {p: app.execute("SELECT has_table_privilege(current_user, %s, %s)", (ROLLOUT, p)).fetchone()[0]
                      for p in ("SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "TRIGGER", "REFERENCES")}
        assert privileges == {"SELECT": True, "INSERT": True, "UPDATE": False, "DELETE": False, "TRUNCATE": False,
                              "TRIGGER": False, "REFERENCES": False}
        refused = {
            "UPDATE": f"UPDATE {ROLLOUT} SET seq = seq",
            "DELETE": f"DELETE FROM {ROLLOUT}",
            "TRUNCATE": f"TRUNCATE {ROLLOUT}",
            "disable triggers": f"ALTER TABLE {ROLLOUT} DISABLE TRIGGER ALL",
            "drop trigger": f"DROP TRIGGER {ROLLOUT}_append_only_rows ON {ROLLOUT}",
            "replace the trigger function": f"CREATE OR REPLACE FUNCTION {ROLLOUT}_append_only() RETURNS trigger "
                                            "AS $$ BEGIN RETURN OLD; END; $$ LANGUAGE plpgsql",
            "replica mode": "SET session_replication_role = replica",
            "drop table": f"DROP TABLE {ROLLOUT}",
            "create table": "CREATE TABLE compactweb_probe (id int)",
        }
        for what, statement in refused.items():
            with pytest.raises(errors.InsufficientPrivilege):
                app.execute(statement)
            assert what  # each statement above is refused by privileges, not by the triggers
        # The purge switch only the test runner uses does not help the role either: DELETE needs a privilege.
        app.execute("SET compactweb.rollout_purge = 'on'")
        with pytest.raises(errors.InsufficientPrivilege):
            app.execute(f"DELETE FROM {ROLLOUT}")
        # Ordinary tables stay writable (sessions are updated as turns run).
        assert app.execute("UPDATE sessions_app_session SET title = title").rowcount > 0


@pytest.mark.services
def test_create_app_role_is_idempotent_and_keeps_the_password(scratch, tmp_path):
    owner_url, app_url, role = scratch
    again = _manage("create_app_role", "--role", role, "--password-file", str(tmp_path / "pw"), "--print-url",
                    database_url=owner_url, tmp_path=tmp_path).strip().splitlines()[-1]
    assert again == app_url
    assert oct((tmp_path / "pw").stat().st_mode & 0o777) == "0o600"


def test_the_statements_grant_only_select_and_insert_on_the_rollout():
    from sessions_app.management.commands.create_app_role import app_database_url, app_role_statements

    text = [s.as_string(None) for s in app_role_statements(role="app", password="pw", database="db")]
    assert 'REVOKE ALL ON TABLE "public"."sessions_app_rolloutline" FROM "app"' in text
    assert 'GRANT SELECT, INSERT ON TABLE "public"."sessions_app_rolloutline" TO "app"' in text
    assert text.index('REVOKE ALL ON TABLE "public"."sessions_app_rolloutline" FROM "app"') > text.index(
        'GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "public" TO "app"')
    assert app_database_url("postgres://owner:secret@db:5432/cw?sslmode=require", role="app", password="p@ss") == (
        "postgres://app:p%40ss@db:5432/cw?sslmode=require")


MAKE_OLD_SESSION = """
from datetime import timedelta
from django.utils import timezone
from compaction_app.models import CompactionPolicy, Provider
from sessions_app.models import Session
from sessions_app.rollout.services import do_append_items, do_create_session
provider, _ = Provider.objects.get_or_create(name="retention-test", defaults={"base_url": Provider.EMBEDDED, "model": "sim-1"})
policy, _ = CompactionPolicy.objects.get_or_create(name="retention-test")
session = do_create_session(title="retention under the app role", provider=provider, policy=policy)
do_append_items(session=session, items=[{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}])
Session.objects.filter(pk=session.pk).update(updated_at=timezone.now() - timedelta(days=40), state="stopped")
print(session.pk)
"""


@pytest.mark.services
def test_the_app_role_archives_and_restores_but_deletes_nothing_else(scratch, tmp_path):
    """Retention (issue 34) under the least-privilege role: the archiver removes an archived session's rollout
    through the SECURITY DEFINER function; the role still cannot DELETE rollout lines itself, cannot delete or
    change an archive record, and the function refuses a session without a record."""
    owner_url, app_url, role = scratch
    session_id = int(_manage("shell", "-c", MAKE_OLD_SESSION, database_url=app_url, tmp_path=tmp_path).split()[-1])

    out = _manage("archive_sessions", "--days", "30", database_url=app_url, tmp_path=tmp_path)

    assert f"archived session {session_id} to " in out
    archive = "sessions_app_sessionarchive"
    with psycopg.connect(app_url, autocommit=True) as app:
        assert app.execute(f"SELECT count(*) FROM {ROLLOUT} WHERE session_id = %s", (session_id,)).fetchone()[0] == 0
        assert app.execute(f"SELECT count(*) FROM {archive} WHERE session_id = %s", (session_id,)).fetchone()[0] == 1
        privileges = {p: app.execute("SELECT has_table_privilege(current_user, %s, %s)", (archive, p)).fetchone()[0]
                      for p in ("SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE")}
        assert privileges == {"SELECT": True, "INSERT": True, "UPDATE": False, "DELETE": False, "TRUNCATE": False}
        other = app.execute(f"SELECT session_id FROM {ROLLOUT} LIMIT 1").fetchone()
        for statement in (f"DELETE FROM {ROLLOUT}", f"DELETE FROM {archive}", f"UPDATE {archive} SET title = ''"):
            with pytest.raises(errors.InsufficientPrivilege):
                app.execute(statement)
        if other is not None:  # a session with lines and no archive record keeps them
            with pytest.raises(errors.RestrictViolation):
                app.execute("SELECT compactweb_delete_archived_rollout(%s)", (other[0],))
        # the trigger's scope setting alone does not let the role delete either
        app.execute(f"SET compactweb.rollout_archive_delete = '{session_id}'")
        with pytest.raises(errors.InsufficientPrivilege):
            app.execute(f"DELETE FROM {ROLLOUT} WHERE session_id = %s", (session_id,))

    out = _manage("restore_archive", "--session", str(session_id), database_url=app_url, tmp_path=tmp_path)

    assert "restored archive" in out
    with psycopg.connect(app_url, autocommit=True) as app:
        restored = app.execute("SELECT id FROM sessions_app_session WHERE title = %s",
                               ("retention under the app role",)).fetchone()
        assert restored is not None
        assert app.execute(f"SELECT count(*) FROM {ROLLOUT} WHERE session_id = %s", restored).fetchone()[0] == 2


def test_the_statements_keep_archive_records_append_only_and_grant_only_the_delete_function():
    from sessions_app.management.commands.create_app_role import app_role_statements

    text = [s.as_string(None) for s in app_role_statements(role="app", password=None, database="db")]
    assert 'GRANT SELECT, INSERT ON TABLE "public"."sessions_app_sessionarchive" TO "app"' in text
    assert 'GRANT EXECUTE ON FUNCTION "public"."compactweb_delete_archived_rollout"(bigint) TO "app"' in text
    assert not [s for s in text if "DELETE ON TABLE" in s and "rolloutline" in s]
