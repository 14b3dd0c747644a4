"""Issue 42: scripts/scale-out skips migrate and the app role (a Django start, a minute or more on a busy host) only
when nothing changed since the last preparation: `manage.py prepare_database` migrates, makes the role and records
the stamp in one process; `python -m compactweb.set_database check` (no Django) then answers the set's
DATABASE_URL, and answers "prepare" (exit 1) when the database's migrations or the role changed, or the role no
longer logs in.

Service-backed: a scratch database and a throwaway role on the PostgreSQL server; one migrate (about 15 s)."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest
from psycopg import sql

from compactweb import set_database

REPO = Path(__file__).resolve().parents[2]


def _run(*args: str, database_url: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "CELERY_BROKER_URL")}
    env.update(DATABASE_URL=database_url, COMPACTWEB_VAR_DIR=str(tmp_path / "var"), COMPACTWEB_RUN_SIMULATOR="0")
    return subprocess.run([sys.executable, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture
def scratch(tmp_path, postgres_url):
    """(owner URL, role) on a fresh, empty scratch database."""
    parts = urlsplit(postgres_url)
    suffix = secrets.token_hex(4)
    name = f"test_{parts.path.lstrip('/') or 'compactweb'}_stamp_{suffix}"[:63]
    role = os.environ.get("COMPACTWEB_TEST_ROLE_PREFIX", "compactweb_test_") + "stamp_" + suffix
    admin_url = parts._replace(path="/postgres").geturl()
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield parts._replace(path=f"/{name}").geturl(), role
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
            admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


def test_a_prepared_database_is_skipped_until_its_migrations_or_role_change(scratch, tmp_path):
    owner_url, role = scratch
    stamp, password = tmp_path / "database.stamp", tmp_path / "app-role.password"

    def check(role_name: str = role) -> subprocess.CompletedProcess:
        return _run("-m", "compactweb.set_database", "check", "--stamp-file", str(stamp), "--role", role_name,
                    "--password-file", str(password), database_url=owner_url, tmp_path=tmp_path)

    assert check().returncode == 1  # never prepared

    prepared = _run("manage.py", "prepare_database", "--role", role, "--password-file", str(password),
                    "--stamp-file", str(stamp), database_url=owner_url, tmp_path=tmp_path)
    assert prepared.returncode == 0, prepared.stdout + prepared.stderr
    app_url = prepared.stdout.strip()
    assert len(prepared.stdout.splitlines()) == 1 and urlsplit(app_url).username == role  # only the URL on stdout
    assert "Applying sessions_app" in prepared.stderr
    with psycopg.connect(app_url) as conn:  # the role exists, with its grants, and logs in
        assert conn.execute("SELECT count(*) FROM sessions_app_rolloutline").fetchone() == (0,)

    skipped = check()
    assert skipped.returncode == 0 and skipped.stdout.strip() == app_url

    assert check(role + "_other").returncode == 1  # another role than the one prepared

    with psycopg.connect(owner_url, autocommit=True) as owner:  # the database migrated back (or elsewhere)
        row = owner.execute("SELECT app, name FROM django_migrations ORDER BY id DESC LIMIT 1").fetchone()
        owner.execute("DELETE FROM django_migrations WHERE app = %s AND name = %s", row)
        assert check().returncode == 1
        owner.execute("INSERT INTO django_migrations (app, name, applied) VALUES (%s, %s, now())", row)
        assert check().returncode == 0

        # The role no longer logs in (this server trusts local connections, so a changed password would pass here;
        # NOLOGIN stands for every way a role stops logging in: dropped, disabled, its password changed).
        owner.execute(sql.SQL("ALTER ROLE {} NOLOGIN").format(sql.Identifier(role)))
        assert check().returncode == 1


def test_the_code_digest_changes_with_a_new_migration_file(tmp_path):
    (tmp_path / "app" / "migrations").mkdir(parents=True)
    (tmp_path / "app" / "migrations" / "0001_initial.py").write_text("# one\n")
    before = set_database.code_digest(tmp_path)
    assert set_database.code_digest(tmp_path) == before
    (tmp_path / "app" / "migrations" / "0002_more.py").write_text("# two\n")
    assert set_database.code_digest(tmp_path) != before
