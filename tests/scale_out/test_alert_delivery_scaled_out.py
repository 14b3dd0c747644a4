"""Alert delivery on a scale-out set (issue 45): a storm raised through the compaction API on a Daphne, compacted
by a Celery worker, is delivered by the worker to a Slack-compatible receiver and by email (real local HTTP and
SMTP servers this test starts); the Slack receiver first answers 503, and the scheduler's housekeeping offers the
delivery again after its back-off until it arrives. One Daphne, one worker, the scheduler, a private redis-server."""

from __future__ import annotations

import time

import pytest

from compaction_app.engine.items import user_message
from compaction_app.models import AlertDelivery, AlertDestination, AlertSettings
from compactweb.api_tokens import issue_token
from tests.scale_out.processes import (
    child_env,
    free_port,
    start_daphne,
    start_scheduler,
    start_worker,
    stop,
    wait_for_log,
)
from tests.scale_out.test_api_jobs_on_a_worker import api, tails
from tests.scale_out.test_redis_restart import start_redis
from tests.sessions_app.compactions.alert_receivers import SmtpReceiver, start_http_receiver

DEADLINE_SECONDS = 90
DELIVER_TASK = "sessions_app.compactions.alert_delivery.deliver_alert_task"


@pytest.mark.services
@pytest.mark.timeout(240)
@pytest.mark.django_db(transaction=True)
def test_a_storm_on_a_scale_out_set_reaches_slack_after_a_retry_and_email(on_postgresql, make_session,
                                                                             operator_user, tmp_path):
    session = make_session(items=[user_message("collect the deploy logs"), user_message("find the failing step")])
    token = issue_token(user=operator_user)
    row = AlertSettings.current()
    row.storm_count = 1
    row.save()
    slack_receiver, smtp = start_http_receiver(), SmtpReceiver()
    slack_receiver.status = 503  # the channel's webhook is failing at first
    AlertDestination.objects.create(name="team channel", kind="slack", url=slack_receiver.url)
    AlertDestination.objects.create(name="on-call mail", kind="email", recipients="oncall@example.com")

    redis_port, port = free_port(), free_port()
    own_redis = f"redis://127.0.0.1:{redis_port}"
    env = {**child_env(redis_url=f"{own_redis}/0", broker_url=f"{own_redis}/1", var_dir=tmp_path),
           "COMPACTWEB_OUTBOUND_ALLOW": "127.0.0.1", "COMPACTWEB_ALERT_RETRY_SECONDS": "1",
           "EMAIL_BACKEND": "django.core.mail.backends.smtp.EmailBackend", "EMAIL_HOST": "127.0.0.1",
           "EMAIL_PORT": str(smtp.port), "COMPACTWEB_PUBLIC_URL": "https://compactweb.example.com"}
    base = f"http://127.0.0.1:{port}"
    logs = {name: tmp_path / f"{name}.log" for name in ("daphne", "worker", "scheduler")}
    redis_server = start_redis(redis_port, tmp_path)
    web = worker = scheduler = None
    try:
        web = start_daphne(port=port, env=env, log=logs["daphne"])
        worker = start_worker(queue="celery", env=env, log=logs["worker"])
        wait_for_log(worker, logs["worker"], "ready")
        deadline = time.monotonic() + DEADLINE_SECONDS
        for _ in range(2):  # the second compaction within the window is the storm
            status, body, _ = api(base, token, "POST", f"/api/v1/sessions/{session.pk}/compact",
                                  {"strategy": "local"})
            assert status == 202, body
            while (polled := api(base, token, "GET", body["job"]["url"])[1])["status"] in ("queued", "running"):
                assert time.monotonic() < deadline, f"{polled}\n{tails(logs)}"
                time.sleep(0.2)
            assert polled["status"] == "succeeded", polled

        (mail,) = smtp.wait_for(1, timeout=DEADLINE_SECONDS)
        assert b"storm alert in session" in mail.content and mail.recipients == ["oncall@example.com"]
        assert f"https://compactweb.example.com/sessions/{session.pk}/".encode() in mail.content
        (refused,) = slack_receiver.wait_for(1, timeout=DEADLINE_SECONDS)

        slack_receiver.status = 200  # the webhook is back: the housekeeping's retry must get through
        scheduler = start_scheduler(env=env, log=logs["scheduler"])
        received = slack_receiver.wait_for(2, timeout=DEADLINE_SECONDS)
        assert len(received) == 2, tails(logs)
        assert received[1].body == refused.body and "storm alert in session" in received[1].json()["text"]
        while AlertDelivery.objects.filter(destination__kind="slack", status="sent").count() == 0:
            assert time.monotonic() < deadline + DEADLINE_SECONDS, tails(logs)
            time.sleep(0.2)
    finally:
        for process in (scheduler, worker, web, redis_server):
            if process is not None:
                stop(process)
        slack_receiver.server.shutdown()
        smtp.stop()

    slack = AlertDelivery.objects.get(destination__kind="slack")
    assert (slack.event, slack.status, slack.attempts) == ("raised", "sent", 2)
    assert AlertDelivery.objects.get(destination__kind="email").status == "sent"
    assert logs["worker"].read_text().count(f"Task {DELIVER_TASK}[") >= 3  # the worker sent all three attempts
    assert DELIVER_TASK not in logs["daphne"].read_text()
