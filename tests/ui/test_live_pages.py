"""The pages: role checks on every view, escaping of transcript text, one partial for the first load, the live
update and the re-sync, the forms (CSRF, compact now, fleet control), the inspector and the analytics page."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from compaction_app.models import CompactionAttempt
from sessions_app.live import render as live_render
from sessions_app.models import Job, Session, SimulatorRun
from sessions_app.rollout.lease import acquire
from sessions_app.rollout.services import do_append_items

SCRIPT = "<script>alert(1)</script>"


@pytest.fixture(autouse=True)
def _no_engine_sleeps(no_engine_sleeps):
    """Retried failures wait no real time (tests/conftest.py)."""


@pytest.fixture
def compacted(make_session, items_factory):
    """A session with two turns compacted locally through the real service (embedded simulated provider)."""
    from sessions_app.compactions.services import do_compact_session

    session = make_session(items=[
        items_factory.user("migrate the settings module " + "please " * 40),
        items_factory.assistant("migrated " + "ok " * 60),
        items_factory.user("now keep backwards compatibility"),
        items_factory.assistant("kept the old names as aliases"),
    ])
    compaction = do_compact_session(session_id=session.pk, strategy="local")
    return session, compaction


def login(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def pages(session_id: int, compaction_id: int) -> list[str]:
    return ["/", "/fleet/rows/", f"/sessions/{session_id}/", f"/sessions/{session_id}/live/",
            f"/compactions/{compaction_id}/", "/analytics/"]


def posts(session_id: int) -> list[str]:
    return [f"/sessions/{session_id}/compact/", "/fleet/start/", f"/sessions/{session_id}/run/pause/"]


@pytest.mark.django_db
def test_every_page_and_form_sends_anonymous_users_to_the_login_page(client, compacted):
    session, compaction = compacted
    for path in pages(session.pk, compaction.pk):
        response = client.get(path)
        assert response.status_code == 302 and response["Location"].startswith("/login/?next="), path
    for path in posts(session.pk):
        assert client.post(path).status_code == 302, path


@pytest.mark.django_db
def test_every_page_and_form_refuses_a_user_without_a_role(make_user, compacted):
    session, compaction = compacted
    client = login(make_user(None))
    for path in pages(session.pk, compaction.pk):
        assert client.get(path).status_code == 403, path
    for path in posts(session.pk):
        assert client.post(path).status_code == 403, path


@pytest.mark.django_db
def test_an_operator_reads_every_page(operator_user, compacted):
    session, compaction = compacted
    client = login(operator_user)
    for path in pages(session.pk, compaction.pk):
        assert client.get(path).status_code == 200, path


@pytest.mark.django_db
def test_forms_refuse_a_post_without_the_csrf_token(operator_user, session):
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator_user)
    assert client.post(f"/sessions/{session.pk}/compact/", {"strategy": ""}).status_code == 403
    page = client.get(f"/sessions/{session.pk}/").content.decode()
    assert 'name="csrfmiddlewaretoken"' in page and '"X-CSRFToken":' in page


@pytest.mark.django_db
def test_a_script_in_the_history_renders_as_text(operator_user, make_session, items_factory):
    session = make_session(items=[items_factory.user(SCRIPT), items_factory.assistant(SCRIPT)])
    body = login(operator_user).get(f"/sessions/{session.pk}/").content.decode()
    assert body.count("&lt;script&gt;alert(1)&lt;/script&gt;") == 2
    assert SCRIPT not in body


@pytest.mark.django_db
def test_a_script_in_a_title_renders_as_text_on_the_fleet(operator_user, make_session):
    make_session(title=SCRIPT)
    body = login(operator_user).get("/").content.decode()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body and SCRIPT not in body


def _items(html: str) -> list[str]:
    return re.findall(r'<li class="item item--\w+" data-seq="\d+">.*?</li>', html, flags=re.S)


@pytest.mark.django_db
def test_the_first_load_and_a_live_update_render_an_item_with_the_same_partial(
    operator_user, session, items_factory
):
    before = session.last_seq
    do_append_items(session=session, items=[items_factory.user("the same partial everywhere")])
    update, _ = live_render.session_batch(session_id=session.pk, after_seq=before)
    page = login(operator_user).get(f"/sessions/{session.pk}/").content.decode()
    (live_item,) = _items(update)
    assert live_item in _items(page)


@pytest.mark.django_db
def test_the_resync_answer_carries_the_pages_fragments_out_of_band(operator_user, make_session, items_factory):
    session = make_session(items=[items_factory.user("resync me")])
    client = login(operator_user)
    page = client.get(f"/sessions/{session.pk}/").content.decode()
    region = client.get(f"/sessions/{session.pk}/live/").content.decode()
    for fragment in ("live-seq", "session-head", "token-chart", "history", "compaction-status", "timeline"):
        assert re.search(rf'id="{fragment}"[^>]*hx-swap-oob="true"', region), fragment
        assert f'id="{fragment}"' in page
    assert _items(region) == _items(page)
    assert f'data-seq="{session.last_seq}"' in region


def compaction_jobs(session) -> list[tuple]:
    """The manual compactions asked for (jobs handed to a runner when the request commits; not run here)."""
    return [(job.kind, job.status, job.actor_id, job.params["strategy"], job.params["instructions"])
            for job in Job.objects.filter(session=session)]


@pytest.mark.django_db
def test_compact_now_starts_a_compaction_with_the_chosen_strategy(operator_user, session):
    response = login(operator_user).post(
        f"/sessions/{session.pk}/compact/", {"strategy": "local", "instructions": " keep names "},
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 200 and b"Compaction started" in response.content
    assert compaction_jobs(session) == [("compaction", "queued", operator_user.pk, "local", "keep names")]


@pytest.mark.django_db
def test_compact_now_with_the_policy_default_passes_no_strategy(operator_user, session):
    response = login(operator_user).post(f"/sessions/{session.pk}/compact/", {"strategy": ""})
    assert response.status_code == 302 and compaction_jobs(session)[0][3] is None


@pytest.mark.django_db
def test_compact_now_says_so_when_the_session_is_busy(operator_user, session):
    acquire(session_id=session.pk, purpose="compaction")
    response = login(operator_user).post(f"/sessions/{session.pk}/compact/", {"strategy": ""}, HTTP_HX_REQUEST="true")
    assert response.status_code == 409 and b"running already" in response.content
    assert compaction_jobs(session) == []


@pytest.mark.django_db
def test_compact_now_refuses_an_unknown_strategy_and_queues_nothing(operator_user, session):
    response = login(operator_user).post(f"/sessions/{session.pk}/compact/", {"strategy": "magic"},
                                         HTTP_HX_REQUEST="true")
    assert response.status_code == 400 and b"Unknown strategy" in response.content and compaction_jobs(session) == []


@pytest.mark.django_db
def test_the_inspector_shows_before_and_after_what_left_and_the_attempts(operator_user, compacted):
    session, compaction = compacted
    body = login(operator_user).get(f"/compactions/{compaction.pk}/").content.decode()
    before = body[body.index('id="before"'):body.index('id="after"')]
    after = body[body.index('id="after"'):body.index('id="left"')]
    assert "migrate the settings module" in before and 'class="item item--summary"' in after
    assert 'class="mark mark--left"' in before
    assert f"{compaction.tokens_before:,}" in body and f"{compaction.tokens_after:,}" in body
    attempt = CompactionAttempt.objects.get(compaction=compaction)
    attempts = body[body.index('id="attempts"'):]
    assert "completed" in attempts and attempt.implementation == "responses" and "local summarisation" in attempts


@pytest.mark.django_db
def test_an_operator_does_not_see_rollback_and_support_does(operator_user, support_user, compacted):
    _, compaction = compacted
    assert b"rollback-button" not in login(operator_user).get(f"/compactions/{compaction.pk}/").content
    body = login(support_user).get(f"/compactions/{compaction.pk}/").content.decode()
    assert f'id="rollback-button" href="/compactions/{compaction.pk}/rollback/"' in body


@pytest.mark.django_db
def test_a_rolled_back_compaction_offers_no_second_rollback(support_user, compacted):
    from sessions_app.compactions.rollback import do_rollback_compaction

    _, compaction = compacted
    do_rollback_compaction(compaction_id=compaction.pk, actor=support_user)
    body = login(support_user).get(f"/compactions/{compaction.pk}/").content.decode()
    assert "rollback-button" not in body and "rolled back" in body


@pytest.mark.django_db
def test_the_analytics_page_counts_attempts_and_filters_by_policy(operator_user, compacted):
    from compaction_app.models import CompactionPolicy

    client = login(operator_user)
    body = client.get("/analytics/").content.decode()
    assert re.search(r"<dt>Attempts</dt><dd>1</dd>", body)
    assert "Failure rate</dt><dd >0.0%" in body or "Failure rate</dt><dd>0.0%" in body
    other = CompactionPolicy.objects.create(name="other")
    body = client.get(f"/analytics/?policy={other.pk}").content.decode()
    assert re.search(r"<dt>Attempts</dt><dd>0</dd>", body) and "No compaction attempts in this period" in body


@pytest.mark.django_db
def test_the_fleet_filters_by_state_and_text(operator_user, make_session):
    running = make_session(title="alpha run")
    Session.objects.filter(pk=running.pk).update(state="running")
    make_session(title="beta idle")
    client = login(operator_user)
    body = client.get("/?state=running").content.decode()
    assert "alpha run" in body and "beta idle" not in body
    assert f'ws-connect="/ws/fleet/?state=running&amp;rows={running.pk}"' in body
    body = client.get("/?q=BETA").content.decode()
    assert "beta idle" in body and "alpha run" not in body


@pytest.mark.django_db
def test_starting_a_fleet_creates_running_simulated_sessions(operator_user, provider, policy):
    response = login(operator_user).post("/fleet/start/", {
        "scenario": "many-short-turns", "count": "2", "provider": provider.pk, "policy": policy.pk,
        "turns_per_minute": "30",
    })
    assert response.status_code == 302
    runs = SimulatorRun.objects.select_related("session")
    assert runs.count() == 2 and {r.session.state for r in runs} == {"running"}
    assert {r.turns_per_minute for r in runs} == {30.0}


@pytest.mark.django_db
def test_a_fleet_can_start_on_a_smaller_context_window(operator_user, provider, policy):
    login(operator_user).post("/fleet/start/", {
        "scenario": "many-short-turns", "count": "1", "provider": provider.pk, "policy": policy.pk,
        "context_window": "6000",
    })
    (run,) = SimulatorRun.objects.select_related("session__provider")
    assert run.session.provider.context_window == 6000


@pytest.mark.django_db
def test_a_bad_fleet_request_starts_nothing_and_says_why_in_the_form(operator_user, provider, policy):
    client = login(operator_user)
    response = client.post("/fleet/start/", {
        "scenario": "no-such-scenario", "count": "2", "provider": provider.pk, "policy": policy.pk,
    })
    body = response.content.decode()
    form = body[body.index('id="start-form"'):body.index("</form>", body.index('id="start-form"'))]
    assert response.status_code == 400 and not SimulatorRun.objects.exists()
    assert "Choose a known scenario." in form and 'class="flash' not in body  # beside the form, not at the top
    assert '<details class="start-fleet" open>' in body and 'value="2"' in form  # still open, what was typed kept

    response = client.post("/fleet/start/", {
        "scenario": "many-short-turns", "count": "1", "provider": provider.pk, "policy": policy.pk,
        "context_window": "100",
    }, HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert response.status_code == 400 and not SimulatorRun.objects.exists()
    assert body.lstrip().startswith('<form id="start-form"') and "at least 2,000 tokens" in body


@pytest.mark.django_db
def test_a_fleet_started_with_htmx_answers_with_the_form_and_a_notice(operator_user, provider, policy):
    response = login(operator_user).post("/fleet/start/", {
        "scenario": "many-short-turns", "count": "1", "provider": provider.pk, "policy": policy.pk,
    }, HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and "Started 1 × many-short-turns." in response.content.decode()
    assert SimulatorRun.objects.count() == 1


@pytest.mark.django_db
def test_pause_resume_and_stop_drive_the_simulated_run(operator_user, provider, policy):
    from sessions_app.fleet.runtime import do_start_fleet

    (run,) = do_start_fleet(scenario="many-short-turns", count=1, provider=provider, policy=policy)
    client = login(operator_user)
    for action, state in (("pause", "paused"), ("resume", "running"), ("stop", "stopped")):
        response = client.post(f"/sessions/{run.session_id}/run/{action}/", HTTP_HX_REQUEST="true")
        assert response.status_code == 200 and f"state--{state}" in response.content.decode()
        assert Session.objects.get(pk=run.session_id).state == state


@pytest.mark.django_db
def test_the_fleet_resync_swaps_the_table_body_once_not_each_row_again(operator_user, make_session):
    make_session(title="one")
    make_session(title="two")
    body = login(operator_user).get("/fleet/rows/").content.decode()
    assert '<tbody id="fleet-rows" hx-swap-oob="true">' in body and not re.search(r'<tr id="session-[^>]*oob', body)
    assert body.count('hx-swap-oob="true"') == 2 and 'id="fleet-counts" ' in body  # the body and the header counts
    assert body.count('<tr id="session-') == 2


@pytest.mark.django_db
def test_the_start_form_takes_as_many_sessions_as_the_api(operator_user, provider, policy):
    from sessions_app.fleet.runtime import MAX_FLEET_SIZE
    from sessions_app.web.forms import FleetStartForm

    client = login(operator_user)
    assert f'name="count" value="3" min="1" max="{MAX_FLEET_SIZE}"' in client.get("/").content.decode()
    data = {"scenario": "many-short-turns", "provider": provider.pk, "policy": policy.pk}
    assert FleetStartForm({**data, "count": str(MAX_FLEET_SIZE)}, scenarios=["many-short-turns"]).is_valid()
    refused = client.post("/fleet/start/", {**data, "count": str(MAX_FLEET_SIZE + 1)})
    assert refused.status_code == 400 and f"1 to {MAX_FLEET_SIZE} sessions" in refused.content.decode()
    assert not SimulatorRun.objects.exists()
