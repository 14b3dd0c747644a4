"""Issue 45's whole picture in one run: a scale-out set (Daphne, a Celery worker, the scheduler, PostgreSQL, a
private Redis) that a user signs into through a real OpenID Provider (oidc-provider, run with node), who mints an
API token on their own page and compacts a session twice through the API; the storm that raises reaches a
Slack-compatible receiver and an SMTP server (both real, started here), and a real Prometheus scrapes the alert
from the web process. About 40 s."""

from __future__ import annotations

import re
import subprocess
import time
from urllib.parse import urljoin

import httpx
import pytest
from django.contrib.auth.models import Group

from compaction_app.engine.items import user_message
from compaction_app.models import AlertDestination, AlertSettings
from compactweb.roles import ROLES
from tests.oidc.test_sso_real_provider import (
    CLIENT_ID,
    CLIENT_SECRET,
    ROLE_GROUPS,
    Provider,
    _form,
    _provider_or_skip,
)
from tests.scale_out import processes as run
from tests.scale_out.test_prometheus_scrape import METRICS_TOKEN, start_prometheus, wait_for
from tests.scale_out.test_redis_restart import start_redis
from tests.sessions_app.compactions.alert_receivers import SmtpReceiver, start_http_receiver

DEADLINE_SECONDS = 90


def sign_in(browser: httpx.Client, base: str, username: str) -> None:
    """The authorization-code flow over real HTTP, compactweb on Daphne and the provider's own pages."""
    location = f"{base}/oidc/authenticate/"
    for _ in range(16):
        page = browser.get(location)
        if page.status_code in (301, 302, 303):
            location = urljoin(location, page.headers["location"])
            if location == f"{base}/":
                return
            continue
        assert page.status_code == 200, page.text[-2000:]
        action, fields = _form(page.text)
        if 'name="login"' in page.text:
            fields.update(login=username, password="anything")
        posted = browser.post(urljoin(location, action), data=fields)
        assert posted.status_code in (302, 303), posted.text
        location = urljoin(location, posted.headers["location"])
    raise AssertionError(f"the sign-in never came back to compactweb: {location}")


def mint_token(browser: httpx.Client, base: str) -> str:
    page = browser.get(f"{base}/api-tokens/").text
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    minted = browser.post(f"{base}/api-tokens/", data={"csrfmiddlewaretoken": csrf}, headers={"Referer": base})
    assert minted.status_code == 200, minted.text[-2000:]
    return re.search(r'id="new-api-token".*?<code>([^<]+)</code>', minted.text, re.S).group(1)


@pytest.mark.services
@pytest.mark.timeout(300)
@pytest.mark.django_db(transaction=True)
def test_a_set_signed_into_through_a_real_provider_is_scraped_and_delivers_a_storm_to_slack_and_email(
        on_postgresql, make_session, tmp_path):
    _provider_or_skip()
    for name in ROLES:  # an earlier transactional test's flush emptied the groups the migration made
        Group.objects.get_or_create(name=name)
    session = make_session(items=[user_message("collect the deploy logs"), user_message("find the failing step")])
    row = AlertSettings.current()
    row.storm_count = 1
    row.save()
    slack, smtp = start_http_receiver(), SmtpReceiver()
    AlertDestination.objects.create(name="team channel", kind="slack", url=slack.url)
    AlertDestination.objects.create(name="on-call mail", kind="email", recipients="oncall@example.com")

    op = Provider(tmp_path)
    op.set_groups("dana", "cw-operators")
    redis_port, port, prometheus_port = run.free_port(), run.free_port(), run.free_port()
    base, own_redis = f"http://127.0.0.1:{port}", f"redis://127.0.0.1:{redis_port}"
    op.redirect_uri = f"{base}/oidc/callback/"
    (tmp_path / "metrics").mkdir()
    env = {**run.child_env(redis_url=f"{own_redis}/0", broker_url=f"{own_redis}/1", var_dir=tmp_path),
           "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "metrics"), "COMPACTWEB_METRICS_TOKEN": METRICS_TOKEN,
           "OIDC_RP_CLIENT_ID": CLIENT_ID, "OIDC_RP_CLIENT_SECRET": CLIENT_SECRET,
           "OIDC_OP_AUTHORIZATION_ENDPOINT": f"{op.issuer}/auth", "OIDC_OP_TOKEN_ENDPOINT": f"{op.issuer}/token",
           "OIDC_OP_USER_ENDPOINT": f"{op.issuer}/me", "OIDC_OP_JWKS_ENDPOINT": f"{op.issuer}/jwks",
           "COMPACTWEB_OIDC_ROLE_GROUPS": ROLE_GROUPS, "COMPACTWEB_OUTBOUND_ALLOW": "127.0.0.1",
           "EMAIL_BACKEND": "django.core.mail.backends.smtp.EmailBackend", "EMAIL_HOST": "127.0.0.1",
           "EMAIL_PORT": str(smtp.port)}
    logs = {name: tmp_path / f"{name}.log" for name in ("web", "worker", "scheduler", "prometheus")}
    started: list[subprocess.Popen] = []
    try:
        started.append(start_redis(redis_port, tmp_path))
        started.append(run.start_daphne(port=port, env=env, log=logs["web"]))
        worker = run.start_worker(queue="celery", env=env, log=logs["worker"])
        started.append(worker)
        started.append(run.start_scheduler(env=env, log=logs["scheduler"]))
        op.start()
        started.append(start_prometheus(port=prometheus_port, targets=[f"127.0.0.1:{port}"], workdir=tmp_path))
        run.wait_for_log(worker, logs["worker"], "ready")

        with httpx.Client(follow_redirects=False, timeout=30) as browser:
            sign_in(browser, base, "dana")
            assert 'class="role role--operator"' in browser.get(f"{base}/").text
            token = mint_token(browser, base)

        api = httpx.Client(base_url=base, headers={"Authorization": f"Token {token}"}, timeout=30)
        deadline = time.monotonic() + DEADLINE_SECONDS
        for _ in range(2):  # the second compaction within the window is the storm
            answer = api.post(f"/api/v1/sessions/{session.pk}/compact", json={"strategy": "local"})
            assert answer.status_code == 202, answer.text
            while (job := api.get(answer.json()["job"]["url"]).json())["status"] in ("queued", "running"):
                assert time.monotonic() < deadline, job
                time.sleep(0.2)
            assert job["status"] == "succeeded", job

        (message,) = slack.wait_for(1, timeout=DEADLINE_SECONDS)
        assert f"storm alert in session {session.pk}: raised" in message.json()["text"]
        (mail,) = smtp.wait_for(1, timeout=DEADLINE_SECONDS)
        assert b"storm alert in session" in mail.content and mail.recipients == ["oncall@example.com"]
        prometheus = f"http://127.0.0.1:{prometheus_port}"
        wait_for(prometheus, 'compactweb_alerts_raised_total{kind="storm"}', lambda v: list(v.values()) == [1.0], logs)
        wait_for(prometheus, 'compactweb_alerts_open{kind="storm"}', lambda v: list(v.values()) == [1.0], logs)
    finally:
        for process in reversed(started):
            run.stop(process)
        op.stop()
        slack.server.shutdown()
        smtp.stop()
