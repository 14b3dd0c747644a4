"""Alert delivery (issue 45) to real local receivers the tests start: an HTTP server for the Slack-compatible and
the JSON webhooks (the HMAC checked as a receiver would), an SMTP server (aiosmtpd) for email, a receiver that is
down and one that is slow. Alerts are raised through the public path (the compaction API), acknowledged through
the alerts API; destinations, the test button and dead letters go through the Django admin."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from datetime import timedelta
from email import message_from_bytes

import pytest
from django.test import Client
from django.utils import timezone

from compaction_app.engine.alert_delivery import SIGNATURE_HEADER, TIMESTAMP_HEADER
from compaction_app.engine.items import user_message
from compaction_app.models import Alert, AlertDelivery, AlertDestination, AlertSettings
from compactweb import background
from sessions_app.compactions import alert_delivery
from sessions_app.models import Session
from tests.sessions_app.compactions.alert_receivers import SmtpReceiver, free_port, start_http_receiver

SECRET_ENV = "COMPACTWEB_KEY_ALERT_HOOK_SECRET"
SECRET = "s3cret-for-the-alert-webhook-test"


@pytest.fixture(autouse=True)
def _jobs_run_inline(no_engine_sleeps, monkeypatch):
    """The job runner's hand-off runs the task at once (as the alert-hook tests do), so each test sees its sends."""
    monkeypatch.setattr(background, "submit", lambda task, **kwargs: task(**kwargs))


@pytest.fixture
def http_receiver():
    receiver = start_http_receiver()
    yield receiver
    receiver.server.shutdown()
    receiver.server.server_close()


@pytest.fixture
def smtp(settings):
    receiver = SmtpReceiver()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", receiver.port
    settings.DEFAULT_FROM_EMAIL = "compactweb@test.invalid"
    yield receiver
    receiver.stop()


@pytest.fixture
def reader(make_session):
    return make_session(items=[
        user_message("look at src/ledger.py"),
        {"type": "function_call", "call_id": "c1", "name": "read_file", "arguments": '{"path": "src/ledger.py"}'},
        {"type": "function_call_output", "call_id": "c1", "output": "def ledger():\n    pass\n" * 50},
        user_message("now fix it"),
    ])


@pytest.fixture
def admin_client(admin_user_role):
    admin_user_role.is_staff = True  # as manage.py create_user makes admins
    admin_user_role.save()
    return login(admin_user_role)


def login(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def storm_after_one():
    row = AlertSettings.current()
    row.storm_count, row.storm_minutes = 1, 10
    row.save()


def post_compaction(api, session, capture) -> tuple[int, dict]:
    """A manual compaction through the API, finished: its status and body. Without a broker the answer is the
    outcome; with CELERY_BROKER_URL set it is 202 with the job, which the inline hand-off above ran at commit, so
    the job's outcome is read back (the status and body the API gives for it)."""
    with capture(execute=True):
        answer = api.post(f"/api/v1/sessions/{session.pk}/compact", {"strategy": "local"}, format="json")
    if answer.status_code == 202:
        job = api.get(answer.json()["job"]["url"]).json()
        assert job["http_status"] is not None, job
        return job["http_status"], job["result"]
    return answer.status_code, answer.json()


def compact(api, session, capture):
    status, body = post_compaction(api, session, capture)
    assert status == 201, body
    return body


def slack(url, **fields) -> AlertDestination:
    return AlertDestination.objects.create(name=fields.pop("name", "slack"), kind="slack", url=url, **fields)


@pytest.mark.django_db
def test_a_storm_raised_through_the_compaction_api_arrives_in_slack_and_by_email(
        operator_api, reader, http_receiver, smtp, django_capture_on_commit_callbacks):
    slack(http_receiver.url)
    AlertDestination.objects.create(name="on-call mail", kind="email", recipients="oncall@example.com, lead@x.org")
    storm_after_one()
    compact(operator_api, reader, django_capture_on_commit_callbacks)
    compact(operator_api, reader, django_capture_on_commit_callbacks)

    (alert,) = Alert.objects.filter(kind="storm")
    (message,) = http_receiver.wait_for(1)
    text = message.json()["text"]
    assert f"[warning] compactweb storm alert in session {reader.pk}: raised" in text
    assert alert.message in text
    (mail,) = smtp.wait_for(1)
    parsed = message_from_bytes(mail.content)
    assert sorted(mail.recipients) == ["lead@x.org", "oncall@example.com"]
    assert parsed["Subject"] == f"[warning] compactweb storm alert in session {reader.pk}: raised"
    assert alert.message in parsed.get_payload(decode=True).decode()
    assert set(AlertDelivery.objects.values_list("status", flat=True)) == {"sent"}


@pytest.mark.django_db
def test_a_json_webhook_carries_the_alert_signed_with_the_secret_from_the_environment(
        operator_api, reader, http_receiver, monkeypatch, admin_client, django_capture_on_commit_callbacks):
    monkeypatch.setenv(SECRET_ENV, SECRET)
    hook = AlertDestination.objects.create(name="pager", kind="webhook", url=http_receiver.url, secret_env=SECRET_ENV)
    storm_after_one()
    compact(operator_api, reader, django_capture_on_commit_callbacks)
    compact(operator_api, reader, django_capture_on_commit_callbacks)

    (message,) = http_receiver.wait_for(1)
    timestamp, signature = message.headers[TIMESTAMP_HEADER], message.headers[SIGNATURE_HEADER]
    # What a receiver does: recompute the HMAC over "<timestamp>.<body>" with the secret it was given.
    expected = hmac.new(SECRET.encode(), timestamp.encode() + b"." + message.body, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(signature, f"sha256={expected}")
    wrong = hmac.new(b"another secret", timestamp.encode() + b"." + message.body, hashlib.sha256).hexdigest()
    assert signature != f"sha256={wrong}"
    body = message.json()
    alert = Alert.objects.get(kind="storm")
    assert body["event"] == "raised"
    assert body["alert"] | {} == body["alert"] and body["alert"]["id"] == alert.pk
    assert (body["alert"]["kind"], body["alert"]["severity"], body["alert"]["session_id"],
            body["alert"]["count"]) == ("storm", "warning", reader.pk, 1)
    # The secret is named, never stored or shown.
    page = admin_client.get(f"/admin/compaction_app/alertdestination/{hook.pk}/change/").content.decode()
    assert SECRET_ENV in page and SECRET not in page
    assert SECRET not in json.dumps(list(AlertDelivery.objects.values("payload", "last_error")))


@pytest.mark.django_db
def test_a_json_webhook_without_its_secret_in_the_environment_is_not_sent_unsigned(
        operator_api, reader, http_receiver, monkeypatch, django_capture_on_commit_callbacks):
    monkeypatch.delenv(SECRET_ENV, raising=False)
    AlertDestination.objects.create(name="pager", kind="webhook", url=http_receiver.url, secret_env=SECRET_ENV)
    storm_after_one()
    compact(operator_api, reader, django_capture_on_commit_callbacks)
    compact(operator_api, reader, django_capture_on_commit_callbacks)
    (delivery,) = AlertDelivery.objects.all()
    assert delivery.status == "pending" and f"{SECRET_ENV} is not set" in delivery.last_error
    assert http_receiver.received == []


@pytest.mark.django_db
def test_one_cause_is_one_message_updated_as_its_count_doubles_and_one_on_acknowledge(
        operator_api, reader, http_receiver, django_capture_on_commit_callbacks):
    slack(http_receiver.url)
    row = AlertSettings.current()
    row.failure_streak = 1
    row.save()
    Session.objects.filter(pk=reader.pk).update(fault_injection={"fault": "overloaded"})
    for _ in range(5):  # every failed attempt raises the streak again: one alert counting 1, 2, 3, 4, 5
        assert post_compaction(operator_api, reader, django_capture_on_commit_callbacks)[0] == 502
    alert = Alert.objects.get(kind="failure_streak")
    assert alert.count == 5
    with django_capture_on_commit_callbacks(execute=True):
        assert operator_api.post(f"/api/v1/alerts/{alert.pk}/acknowledge").status_code == 200
    with django_capture_on_commit_callbacks(execute=True):  # a second acknowledge tells nobody twice
        operator_api.post(f"/api/v1/alerts/{alert.pk}/acknowledge")
    alert.refresh_from_db()

    texts = [m.json()["text"] for m in http_receiver.wait_for(4)]
    assert [t.split(": ", 1)[1].split("*")[0] for t in texts] == [
        "raised", "raised again (×2)", "raised again (×4)", "acknowledged by " + alert.acknowledged_by.username]
    assert list(AlertDelivery.objects.order_by("pk").values_list("event", "count")) == [
        ("raised", 1), ("updated", 2), ("updated", 4), ("acknowledged", 5)]


@pytest.mark.django_db
def test_a_cause_not_raised_again_within_the_grouping_window_is_told_resolved_once(
        operator_api, reader, http_receiver, django_capture_on_commit_callbacks):
    slack(http_receiver.url)
    storm_after_one()
    compact(operator_api, reader, django_capture_on_commit_callbacks)
    compact(operator_api, reader, django_capture_on_commit_callbacks)
    assert alert_delivery.retry_due() == 0  # still within the window: nothing to resolve
    later = timezone.now() + timedelta(minutes=61)
    alert_delivery.retry_due(now=later)
    alert_delivery.retry_due(now=later)
    texts = [m.json()["text"] for m in http_receiver.wait_for(2)]
    assert len(texts) == 2 and "resolved: not raised again (×1 in all)" in texts[1]


@pytest.mark.django_db
def test_destinations_get_only_the_kinds_and_severities_they_chose(
        operator_api, reader, http_receiver, django_capture_on_commit_callbacks):
    slack(http_receiver.url, name="critical only", min_severity="critical")
    slack(http_receiver.url, name="loops only", kinds=["loop"])
    slack(http_receiver.url, name="storms", kinds=["storm"], min_severity="warning")
    slack(http_receiver.url, name="off", enabled=False)
    storm_after_one()
    compact(operator_api, reader, django_capture_on_commit_callbacks)
    compact(operator_api, reader, django_capture_on_commit_callbacks)
    assert list(AlertDelivery.objects.values_list("destination__name", flat=True)) == ["storms"]
    assert len(http_receiver.wait_for(1)) == 1


@pytest.mark.django_db
def test_a_receiver_that_is_down_is_retried_with_back_off_then_is_a_dead_letter_the_admin_sees_and_retries(
        operator_api, reader, settings, admin_client, http_receiver, django_capture_on_commit_callbacks):
    settings.COMPACTWEB_ALERT_MAX_ATTEMPTS = 3
    settings.COMPACTWEB_ALERT_RETRY_SECONDS = 30
    down = slack(f"http://127.0.0.1:{free_port()}/hook", name="down")
    storm_after_one()
    compact(operator_api, reader, django_capture_on_commit_callbacks)
    compact(operator_api, reader, django_capture_on_commit_callbacks)

    (delivery,) = AlertDelivery.objects.all()
    waits = []
    for attempt in (1, 2):
        assert (delivery.status, delivery.attempts) == ("pending", attempt)
        assert "ConnectError" in delivery.last_error
        waits.append((delivery.next_attempt_at - timezone.now()).total_seconds())
        assert alert_delivery.retry_due() == 0  # not due before its back-off
        alert_delivery.retry_due(now=delivery.next_attempt_at)
        delivery.refresh_from_db()
    assert 25 < waits[0] <= 30 and 55 < waits[1] <= 60  # 30 s, then doubled
    assert (delivery.status, delivery.attempts, delivery.next_attempt_at) == ("dead", 3, None)
    assert alert_delivery.retry_due(now=timezone.now() + timedelta(days=1) - timedelta(minutes=1)) == 0

    page = admin_client.get("/admin/compaction_app/alertdelivery/?status__exact=dead").content.decode()
    assert "dead letter" in page and "ConnectError" in page and "down" in page

    # The receiver is back: the admin retries the dead letter from the list.
    AlertDestination.objects.filter(pk=down.pk).update(url=http_receiver.url)
    with django_capture_on_commit_callbacks(execute=True):
        answer = admin_client.post("/admin/compaction_app/alertdelivery/",
                                   {"action": "retry", "_selected_action": [delivery.pk]})
    assert answer.status_code == 302
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("sent", 1)
    assert len(http_receiver.wait_for(1)) == 1


@pytest.mark.django_db
def test_a_slow_receiver_times_out_and_the_message_arrives_on_the_retry(
        operator_api, reader, http_receiver, django_capture_on_commit_callbacks):
    http_receiver.delay = 2.0
    slack(http_receiver.url, timeout_seconds=0.3)
    storm_after_one()
    compact(operator_api, reader, django_capture_on_commit_callbacks)
    compact(operator_api, reader, django_capture_on_commit_callbacks)
    (delivery,) = AlertDelivery.objects.all()
    assert (delivery.status, delivery.last_error) == ("pending", "timed out after 0.3 s")

    http_receiver.delay = 0.0
    alert_delivery.retry_due(now=delivery.next_attempt_at)
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.last_error) == ("sent", 2, "")
    # At least once: the slow receiver had read the first attempt before the sender gave up waiting.
    assert len(http_receiver.wait_for(2)) == 2


@pytest.mark.django_db
def test_email_to_a_server_that_is_down_or_slow_is_retried_until_it_is_sent(
        operator_api, reader, smtp, settings, django_capture_on_commit_callbacks):
    settings.EMAIL_PORT = free_port()  # down
    AlertDestination.objects.create(name="mail", kind="email", recipients="oncall@example.com", timeout_seconds=0.5)
    storm_after_one()
    compact(operator_api, reader, django_capture_on_commit_callbacks)
    compact(operator_api, reader, django_capture_on_commit_callbacks)
    (delivery,) = AlertDelivery.objects.all()
    assert delivery.status == "pending" and "ConnectionRefused" in delivery.last_error

    settings.EMAIL_PORT = smtp.port
    smtp.handler.delay = 2.0  # up, but slow to accept the message
    alert_delivery.retry_due(now=delivery.next_attempt_at)
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("pending", 2) and "timed out" in delivery.last_error

    smtp.handler.delay = 0.0
    alert_delivery.retry_due(now=delivery.next_attempt_at)
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("sent", 3)
    assert any(b"storm alert" in mail.content for mail in smtp.wait_for(1))


@pytest.mark.django_db
def test_destination_urls_follow_the_outbound_rule_on_save_and_before_each_send(
        operator_api, reader, settings, admin_client, http_receiver, django_capture_on_commit_callbacks):
    settings.COMPACTWEB_OUTBOUND_ALLOW = []
    form = {"name": "inside", "kind": "slack", "url": "http://10.0.0.5/hook", "secret_env": "", "recipients": "",
            "kinds": "[]", "min_severity": "info", "timeout_seconds": "5", "enabled": "on"}
    answer = admin_client.post("/admin/compaction_app/alertdestination/add/", form)
    assert answer.status_code == 200 and "COMPACTWEB_OUTBOUND_ALLOW" in answer.content.decode()
    assert not AlertDestination.objects.exists()

    # Saved while loopback was allowed; the deployment has since taken it off its list.
    settings.COMPACTWEB_OUTBOUND_ALLOW = ["127.0.0.1"]
    slack(http_receiver.url)
    settings.COMPACTWEB_OUTBOUND_ALLOW = []
    storm_after_one()
    compact(operator_api, reader, django_capture_on_commit_callbacks)
    compact(operator_api, reader, django_capture_on_commit_callbacks)
    (delivery,) = AlertDelivery.objects.all()
    assert delivery.last_error.startswith("URL refused: 127.0.0.1 is a private or loopback address")
    assert http_receiver.received == []


def button_form(client, destination) -> tuple[str, dict]:
    """The "Send a test message" form of a destination's admin page: where it posts and what."""
    page = client.get(f"/admin/compaction_app/alertdestination/{destination.pk}/change/").content.decode()
    form = re.search(r'<form method="post" action="([^"]+)">(.*?)Send a test message</button>', page, re.S)
    fields = dict(re.findall(r'name="([^"]+)" value="([^"]*)"', form.group(2)))
    return form.group(1), {k: v for k, v in fields.items() if k != "csrfmiddlewaretoken"}


@pytest.mark.django_db
def test_an_admin_sends_a_test_message_with_the_button_and_an_operator_cannot(
        admin_client, operator_user, http_receiver, smtp):
    hook = slack(http_receiver.url, name="team channel")
    mail = AlertDestination.objects.create(name="mail", kind="email", recipients="oncall@example.com")
    action, fields = button_form(admin_client, hook)

    answer = admin_client.post(action, fields, follow=True)
    assert "Test message sent to team channel" in answer.content.decode()
    (message,) = http_receiver.wait_for(1)
    assert "test message" in message.json()["text"]
    admin_client.post(*button_form(admin_client, mail))
    assert "test message" in smtp.wait_for(1)[0].content.decode()

    http_receiver.status = 500
    answer = admin_client.post(action, fields, follow=True)
    assert "Test message to team channel failed: answered HTTP 500" in answer.content.decode()
    assert AlertDelivery.objects.filter(event="test", status="dead").count() == 1

    operator = login(operator_user)
    before = len(http_receiver.received)
    answer = operator.post(action, fields)
    assert answer.status_code == 302 and "/admin/login/" in answer["Location"]
    assert len(http_receiver.received) == before


@pytest.mark.django_db
def test_an_email_destination_needs_valid_addresses_and_a_json_webhook_needs_a_secret(admin_client):
    base = {"name": "x", "url": "", "secret_env": "", "kinds": "[]", "min_severity": "info",
            "timeout_seconds": "5", "enabled": "on"}
    answer = admin_client.post("/admin/compaction_app/alertdestination/add/",
                               {**base, "kind": "email", "recipients": "oncall@example.com, not-an-address"})
    assert "&#x27;not-an-address&#x27; is not an email address" in answer.content.decode()
    answer = admin_client.post("/admin/compaction_app/alertdestination/add/",
                               {**base, "kind": "webhook", "url": "https://hooks.example.com/a", "recipients": ""})
    assert "name the variable that holds its secret" in answer.content.decode()
    answer = admin_client.post("/admin/compaction_app/alertdestination/add/",
                               {**base, "kind": "webhook", "url": "https://hooks.example.com/a", "recipients": "",
                                "secret_env": "DATABASE_PASSWORD"})
    assert "DATABASE_PASSWORD is not an allowed secret variable" in answer.content.decode()
    answer = admin_client.post("/admin/compaction_app/alertdestination/add/",
                               {**base, "kind": "slack", "url": "https://hooks.example.com/a", "recipients": "",
                                "kinds": '["storm", "nonsense"]'})
    assert "a list of alert kinds" in answer.content.decode()
    assert not AlertDestination.objects.exists()


URL_ENV = "COMPACTWEB_KEY_ALERT_SLACK_URL"


@pytest.mark.django_db
def test_a_slack_url_named_by_an_environment_variable_is_sent_to_and_never_stored_shown_or_recorded(
        operator_api, reader, settings, monkeypatch, admin_client, http_receiver, django_capture_on_commit_callbacks):
    secret_url = f"{http_receiver.url}/services/T000/B000/xoxb-secret-part"
    monkeypatch.setenv(URL_ENV, secret_url)
    form = {"name": "team channel", "kind": "slack", "url": "", "url_env": URL_ENV, "secret_env": "",
            "recipients": "", "kinds": "[]", "min_severity": "info", "timeout_seconds": "5", "enabled": "on"}
    both = admin_client.post("/admin/compaction_app/alertdestination/add/", {**form, "url": secret_url})
    assert "give the URL or the variable that holds it, not both" in both.content.decode()
    refused = admin_client.post("/admin/compaction_app/alertdestination/add/", {**form, "url_env": "DATABASE_URL"})
    assert "DATABASE_URL is not an allowed secret variable" in refused.content.decode()
    assert admin_client.post("/admin/compaction_app/alertdestination/add/", form).status_code == 302
    (hook,) = AlertDestination.objects.all()

    storm_after_one()
    compact(operator_api, reader, django_capture_on_commit_callbacks)
    compact(operator_api, reader, django_capture_on_commit_callbacks)
    (message,) = http_receiver.wait_for(1)
    assert message.path == "/hook/services/T000/B000/xoxb-secret-part"
    assert "storm alert" in message.json()["text"]

    # The URL is read before each send: neither the rule it must pass nor a missing variable reveals it.
    settings.COMPACTWEB_OUTBOUND_ALLOW = []
    action, fields = button_form(admin_client, hook)
    answer = admin_client.post(action, fields, follow=True).content.decode()
    assert "failed: URL refused: 127.0.0.1 is a private or loopback address" in answer
    monkeypatch.delenv(URL_ENV)
    answer = admin_client.post(action, fields, follow=True).content.decode()
    assert f"failed: URL variable {URL_ENV} is not set" in answer
    assert len(http_receiver.received) == 1

    pages = [admin_client.get(f"/admin/compaction_app/alertdestination/{hook.pk}/change/").content.decode(),
             admin_client.get("/admin/compaction_app/alertdestination/").content.decode(),
             admin_client.get("/admin/compaction_app/alertdelivery/").content.decode()]
    assert all("xoxb-secret-part" not in page for page in pages) and URL_ENV in pages[0] and URL_ENV in pages[1]
    rows = json.dumps(list(AlertDestination.objects.values()), default=str) + json.dumps(
        list(AlertDelivery.objects.values("payload", "last_error")))
    assert "xoxb-secret-part" not in rows
