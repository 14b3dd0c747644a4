"""Whether a scaled-out set's database is as the previous set left it, checked without starting Django (issue 42).

scripts/scale-out migrates and creates the least-privilege role before it starts a set (`manage.py
prepare_database`, one Django start for both). On a busy host a Django start takes a minute or more, so a set that
restarts after a supervisor kill, with nothing changed, would spend most of its cold start on work that does
nothing. After a successful preparation the launcher records a stamp in its run directory; the next launcher runs
`python -m compactweb.set_database check`, which compares:

- the code's migrations: a digest of every migration file of the project and of the names (with versions) of the
  installed distributions (a new migration, or a Django or library upgrade, changes it);
- the database's migrations: a digest of the rows of `django_migrations` (a recreated, migrated-back or
  migrated-elsewhere database changes it);
- the owner's DATABASE_URL and the role's name;
- and that the role logs in with the password in its file (a dropped role, or a changed password, fails).

Any difference, or any error, means "prepare": the check never skips on doubt. Plain Python and psycopg, no Django.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import sysconfig
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

import psycopg

ROOT = Path(__file__).resolve().parent.parent
CONNECT_TIMEOUT_SECONDS = 10


def app_database_url(owner_url: str, *, role: str, password: str | None) -> str:
    """The owner's DATABASE_URL with the app role's user and password."""
    parts = urlsplit(owner_url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    userinfo = quote(role, safe="") + (f":{quote(password, safe='')}" if password else "")
    netloc = f"{userinfo}@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def code_digest(root: Path = ROOT) -> str:
    """A digest of the project's migration files and of the installed distributions' names and versions."""
    digest = hashlib.sha256()
    for path in sorted(root.glob("*/migrations/*.py")):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    site = Path(sysconfig.get_paths()["purelib"])
    for name in sorted(p.name for p in site.glob("*.dist-info")):
        digest.update(name.encode() + b"\0")
    return digest.hexdigest()


def applied_digest(owner_url: str) -> str:
    """A digest of the migrations the database records as applied."""
    with psycopg.connect(owner_url, connect_timeout=CONNECT_TIMEOUT_SECONDS) as conn:
        rows = conn.execute("SELECT app, name FROM django_migrations ORDER BY app, name").fetchall()
    return hashlib.sha256(json.dumps(rows).encode()).hexdigest()


def stamp(owner_url: str, role: str) -> dict:
    return {
        "code": code_digest(),
        "applied": applied_digest(owner_url),
        "owner": hashlib.sha256(owner_url.encode()).hexdigest(),
        "role": role,
    }


def _password(password_file: Path | None) -> str | None:
    return password_file.read_text().strip() if password_file is not None else None


def url_if_prepared(stamp_file: Path, owner_url: str, role: str, password_file: Path | None) -> str | None:
    """The DATABASE_URL the set runs with when nothing changed since the stamp was recorded, else None."""
    try:
        recorded = json.loads(stamp_file.read_text())
        if recorded != stamp(owner_url, role):
            return None
        if not role:
            return owner_url
        url = app_database_url(owner_url, role=role, password=_password(password_file))
        with psycopg.connect(url, connect_timeout=CONNECT_TIMEOUT_SECONDS) as conn:
            conn.execute("SELECT 1")
        return url
    except (OSError, ValueError, psycopg.Error):
        return None


def record(stamp_file: Path, owner_url: str, role: str) -> None:
    """Record that the database was prepared (migrated, role made) for the code as it is now."""
    stamp_file.parent.mkdir(parents=True, exist_ok=True)
    tmp = stamp_file.with_suffix(".tmp")
    tmp.write_text(json.dumps(stamp(owner_url, role)))
    tmp.replace(stamp_file)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["check"])
    parser.add_argument("--stamp-file", type=Path, required=True)
    parser.add_argument("--role", default="", help="The app role's name; empty when the set runs as the owner.")
    parser.add_argument("--password-file", type=Path)
    args = parser.parse_args(argv)
    # The owner's URL comes from the environment, not the command line, where `ps` would show its password.
    url = url_if_prepared(args.stamp_file, os.environ.get("DATABASE_URL", ""), args.role, args.password_file)
    if url is None:
        return 1
    sys.stdout.write(url + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
