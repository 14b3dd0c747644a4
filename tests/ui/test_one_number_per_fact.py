"""One number per fact (issue 33 item 2): a compaction's window tokens before, after and freed are the same on every
page that shows them (the session page, the fleet board, the inspector, the rollback page, the analytics) and in the
JSON API; the measures that differ on purpose (Codex's analytics figures, a rollback's restored estimate) carry
their own labels and explanations."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.utils.html import escape

from compaction_app.engine.items import user_message
from compaction_app.models import CompactionAttempt, CompactionPolicy, Provider
from sessions_app.compactions.token_definitions import DEFINITIONS
from sessions_app.rollout.services import do_create_session
from tests.fakes.scripted_provider import (
    Reply,
    assistant,
    compaction,
    completed,
    created,
    output_item_done,
)

BODY = [user_message("fix the parser " * 40), assistant("Looking at it. " * 40), user_message("add a test " * 30),
        assistant("Added tests/test_parser.py. " * 20)]


@pytest.fixture
def remote_v2_compaction(scripted_v2, support_api):
    """A remote v2 compaction through the API whose Codex analytics differ from its window tokens on purpose: the
    server's usage says 700 input tokens, the meter says more."""
    scripted, session = scripted_v2
    scripted.add(Reply.sse([created(), output_item_done(compaction("ENC-1")),
                            completed(input_tokens=700, output_tokens=40)]))
    response = support_api.post(f"/api/v1/sessions/{session.pk}/compact", {"strategy": "remote_v2"}, format="json")
    assert response.status_code == 201, response.content
    return session, response.json()["id"]


@pytest.fixture
def scripted_v2(db, served_script):
    provider = Provider.objects.create(name="v2", base_url=served_script.base_url, model="gpt-test",
                                       context_window=100_000, remote_compaction="v2", stream_max_retries=0,
                                       request_max_retries=0)
    policy = CompactionPolicy.objects.create(name="v2", remote_compaction_v2=True)
    return served_script, do_create_session(title="numbers", provider=provider, policy=policy,
                                            base_instructions="Be careful.", items=BODY)


def said(name: str) -> str:
    """A definition as a page renders it (escaped)."""
    return str(escape(DEFINITIONS[name]))


def page(client: Client, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200, url
    return response.content.decode()


def text_of(html: str, element_id: str) -> str:
    match = re.search(rf'id="{element_id}"[^>]*>([^<]*)', html)
    assert match, element_id
    return match.group(1).strip()


@pytest.mark.django_db
def test_a_compaction_shows_the_same_window_tokens_on_every_page_and_in_the_api(remote_v2_compaction, support_user,
                                                                               support_api):
    session, pk = remote_v2_compaction
    detail = support_api.get(f"/api/v1/compactions/{pk}").json()
    before, after = detail["tokens_before"], detail["tokens_after"]
    assert detail["tokens_freed"] == detail["cost"]["tokens_freed"] == before - after > 0
    listed = support_api.get(f"/api/v1/sessions/{session.pk}/compactions").json()
    assert [c["tokens_freed"] for c in listed] == [before - after]
    client = Client()
    client.force_login(support_user)

    inspector = page(client, f"/compactions/{pk}/")
    assert (text_of(inspector, "tokens-before"), text_of(inspector, "tokens-after")) == (f"{before:,}", f"{after:,}")
    assert text_of(inspector, "tokens-freed") == f"{before - after:,}"
    session_page = page(client, f"/sessions/{session.pk}/")
    assert session_page.count(f'data-window-tokens="{before}:{after}"') == 2  # compaction status and timeline
    fleet = page(client, "/")
    assert f'data-window-tokens="{before}:{after}"' in fleet
    assert f"{before:,} → {after:,} window tokens" in fleet  # the short form's exact figures
    assert text_of(page(client, f"/compactions/{pk}/rollback/"), "rollback-window-before") == f"{before:,}"
    assert text_of(page(client, "/analytics/"), "analytics-freed") == f"{before - after:,}"


@pytest.mark.django_db
def test_codex_analytics_figures_differ_on_purpose_and_are_labelled_where_they_appear(remote_v2_compaction,
                                                                                      support_user, support_api):
    session, pk = remote_v2_compaction
    attempt = CompactionAttempt.objects.get(compaction_id=pk)
    detail = support_api.get(f"/api/v1/compactions/{pk}").json()
    assert attempt.tokens_before == 700 != detail["tokens_before"]  # spec §4.3 step 7: the server's input tokens
    assert detail["attempts"][0]["analytics"]["active_context_tokens_before"] == 700
    client = Client()
    client.force_login(support_user)
    inspector = page(client, f"/compactions/{pk}/")
    assert "Codex analytics before</th>" in inspector and "Codex analytics after</th>" in inspector
    assert said("analytics_tokens") in inspector and said("window_tokens") in inspector
    # The session page and the fleet show the window tokens, never the analytics figure.
    assert 'data-window-tokens="700:' not in page(client, f"/sessions/{session.pk}/")
    assert 'data-window-tokens="700:' not in page(client, "/")


@pytest.mark.django_db
def test_the_rollback_page_labels_both_figures_and_its_estimate_is_the_meter_after_the_rollback(
        remote_v2_compaction, support_user, support_api):
    session, pk = remote_v2_compaction
    preview = support_api.get(f"/api/v1/compactions/{pk}/rollback").json()
    assert preview["window_tokens_before"] == support_api.get(f"/api/v1/compactions/{pk}").json()["tokens_before"]
    client = Client()
    client.force_login(support_user)
    confirm = page(client, f"/compactions/{pk}/rollback/")
    assert text_of(confirm, "rollback-restored") == f"{preview['restored_tokens_estimate']:,}"
    assert "Meter after the rollback (estimate)" in confirm and said("restored_estimate") in confirm
    done = support_api.post(f"/api/v1/compactions/{pk}/rollback", {"reason": "check the figures"}, format="json")
    assert done.status_code in (200, 201), done.content
    assert done.json()["tokens_in_window"] == preview["restored_tokens_estimate"]


@pytest.mark.django_db
def test_analytics_says_window_tokens_freed_with_its_definition(remote_v2_compaction, support_user):
    client = Client()
    client.force_login(support_user)
    analytics = page(client, "/analytics/")
    assert "Tokens saved" not in analytics and "Window tokens freed" in analytics
    assert said("tokens_freed") in analytics


@pytest.mark.django_db
def test_the_chart_draws_each_window_with_the_limit_it_had(operator_user, make_session, items_factory, policy):
    from sessions_app.compactions.services import do_compact_session

    session = make_session(items=[items_factory.user("a task " * 50), items_factory.assistant("ok " * 50)])
    # Window 1 opened under the window's default limit (90% of 32,000).
    CompactionPolicy.objects.filter(pk=policy.pk).update(auto_compact_token_limit=12_000)
    do_compact_session(session_id=session.pk, strategy="token_budget")  # window 2 opens under 12,000
    CompactionPolicy.objects.filter(pk=policy.pk).update(auto_compact_token_limit=9_000)
    do_compact_session(session_id=session.pk, strategy="token_budget")  # window 3, the current one: 9,000
    client = Client()
    client.force_login(operator_user)
    chart = page(client, f"/sessions/{session.pk}/")
    chart = chart[chart.index('id="token-chart"'):chart.index("</section>", chart.index('id="token-chart"'))]
    limits = [int(v) for v in re.findall(r'data-limit="(\d+)"', chart)]
    assert limits == [28_800, 12_000, 9_000]
