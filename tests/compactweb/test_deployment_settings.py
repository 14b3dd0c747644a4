"""Issue 14: one switch (COMPACTWEB_HTTPS) makes `manage.py check --deploy` clean; every page carries a
Content-Security-Policy; the embedded default's var/ is 0700 and its database 0600."""

from __future__ import annotations

import os
import secrets
import stat
import subprocess
import sys
from pathlib import Path

from django.conf import settings as django_settings

from compactweb.var_dir import secure_dir, secure_file

REPO = Path(__file__).resolve().parents[2]


def _run(code_or_args: list[str], tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    """Settings are read once at start-up, so each configuration runs in a process of its own."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("COMPACTWEB_", "DJANGO_"))}
    environment.update(COMPACTWEB_VAR_DIR=str(tmp_path / "var"), DJANGO_SETTINGS_MODULE="compactweb.settings", **env)
    environment.pop("DATABASE_URL", None)
    return subprocess.run([sys.executable, *code_or_args], cwd=REPO, env=environment, capture_output=True,
                          text=True, timeout=120)


DEPLOYMENT = {"DJANGO_SECRET_KEY": secrets.token_urlsafe(50), "DJANGO_ALLOWED_HOSTS": "compactweb.example"}


def test_check_deploy_is_clean_with_the_https_switch(tmp_path):
    result = _run(["manage.py", "check", "--deploy", "--fail-level", "WARNING"], tmp_path, COMPACTWEB_HTTPS="1",
                  **DEPLOYMENT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_without_the_switch_check_deploy_names_what_is_missing(tmp_path):
    result = _run(["manage.py", "check", "--deploy", "--fail-level", "WARNING"], tmp_path, **DEPLOYMENT)
    assert result.returncode != 0
    for warning in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert warning in result.stderr + result.stdout


def test_the_switch_sets_secure_cookies_hsts_and_the_redirect_but_not_for_health_checks_or_scrapes(tmp_path):
    code = ("import django; django.setup(); from django.conf import settings as s; print(s.SESSION_COOKIE_SECURE, "
            "s.CSRF_COOKIE_SECURE, s.SECURE_SSL_REDIRECT, s.SECURE_HSTS_SECONDS, s.SECURE_REDIRECT_EXEMPT)")
    result = _run(["-c", code], tmp_path, COMPACTWEB_HTTPS="1", **DEPLOYMENT)
    assert result.stdout.split("\n")[-2] == "True True True 31536000 ['^healthz$', '^metrics$']", result.stderr


def test_every_page_carries_a_content_security_policy(client):
    policy = client.get("/login/")["Content-Security-Policy"]
    directives = dict(d.strip().split(" ", 1) for d in policy.split(";"))
    assert directives["script-src"] == "'self'"  # no inline script, no eval: an injected <script> does not run
    assert directives["object-src"] == "'none'" and directives["frame-ancestors"] == "'none'"
    assert directives["default-src"] == "'self'"


def test_the_embedded_default_makes_var_private_and_the_database_0600(tmp_path):
    result = _run(["-c", "import django; django.setup()"], tmp_path)
    assert result.returncode == 0, result.stderr
    var = tmp_path / "var"
    assert stat.S_IMODE(var.stat().st_mode) == 0o700
    assert stat.S_IMODE((var / "compactweb.sqlite3").stat().st_mode) == 0o600
    assert stat.S_IMODE((var / "secret_key").stat().st_mode) == 0o600


def test_an_existing_world_readable_var_is_tightened(tmp_path):
    var, db = tmp_path / "old-var", tmp_path / "old-var" / "db.sqlite3"
    var.mkdir(mode=0o755)
    db.write_text("")
    db.chmod(0o644)
    secure_dir(var)
    secure_file(db)
    assert stat.S_IMODE(var.stat().st_mode) == 0o700 and stat.S_IMODE(db.stat().st_mode) == 0o600


def test_this_test_runs_var_is_private_too():
    assert stat.S_IMODE(Path(django_settings.VAR_DIR).stat().st_mode) == 0o700
