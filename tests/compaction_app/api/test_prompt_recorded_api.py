"""Which summarisation prompt (and version) a compaction used, through the JSON API against the scripted provider:
recorded when a local summary sends one, null when the method sends none, and shown by the inspector and the
policy form."""

from __future__ import annotations

import hashlib

import pytest
from django.test import Client

from compaction_app.engine.items import user_message
from compaction_app.engine.prompts import SUMMARIZATION_PROMPT
from compaction_app.models import CompactionPolicy, Prompt, Provider
from sessions_app.rollout.services import do_create_session
from tests.fakes.scripted_provider import (
    Reply,
    assistant,
    compaction,
    completed,
    created,
    output_item_done,
)

CALL = {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{\"cmd\": \"pytest\"}"}
OUT = {"type": "function_call_output", "call_id": "c1", "output": "1 failed, 41 passed\n" * 40}
BODY = [user_message("fix the parser"), CALL, OUT, assistant("Looking."), user_message("add a test"),
        assistant("Added.")]


def version(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


@pytest.fixture
def scripted(served_script):
    return served_script


def make(scripted, *, remote: str = "none", name: str = "prompted", **policy_fields):
    provider = Provider.objects.create(name=f"scripted-{name}", base_url=scripted.base_url, model="gpt-test",
                                       context_window=100_000, remote_compaction=remote, stream_max_retries=0,
                                       request_max_retries=0)
    policy = CompactionPolicy.objects.create(name=name, **policy_fields)
    return do_create_session(title="prompted", provider=provider, policy=policy, base_instructions="Be careful.",
                             items=BODY)


def summary_reply(text: str = "S: parser fixed") -> Reply:
    return Reply.sse([created(), output_item_done(assistant(text)), completed(input_tokens=90, output_tokens=5)])


def compact(api, session, **body) -> dict:
    response = api.post(f"/api/v1/sessions/{session.pk}/compact", body, format="json")
    assert response.status_code == 201, response.content
    return response.json()


@pytest.mark.django_db
def test_a_local_summary_records_the_default_prompt_and_its_version(operator_api, scripted):
    session = make(scripted)
    scripted.add(summary_reply())
    created_body = compact(operator_api, session, strategy="local")
    assert scripted.requests[0].json["input"][-1] == user_message(SUMMARIZATION_PROMPT)
    detail = operator_api.get(f"/api/v1/compactions/{created_body['id']}").json()
    assert detail["prompt"] == {"name": "default (Codex's SUMMARIZATION_PROMPT)",
                                "version": version(SUMMARIZATION_PROMPT)}
    assert created_body["prompt"] == detail["prompt"]


@pytest.mark.django_db
def test_a_stored_prompt_is_recorded_by_name_and_a_new_text_gets_a_new_version(operator_api, scripted):
    prompt = Prompt.objects.create(name="terse", text="Summarise tersely.")
    session = make(scripted, prompt=prompt)
    scripted.add(summary_reply())
    first = compact(operator_api, session, strategy="local")
    assert first["prompt"] == {"name": "terse", "version": version("Summarise tersely.")}
    Prompt.objects.filter(pk=prompt.pk).update(text="Summarise very tersely.")
    scripted.add(summary_reply("S2"))
    second = compact(operator_api, session, strategy="local")
    assert second["prompt"] == {"name": "terse", "version": version("Summarise very tersely.")}
    # The first compaction keeps the version it was made with.
    assert operator_api.get(f"/api/v1/compactions/{first['id']}").json()["prompt"]["version"] == version(
        "Summarise tersely.")


@pytest.mark.django_db
def test_the_policy_compact_prompt_is_named_after_the_policy_and_extra_instructions_do_not_change_it(
        operator_api, scripted):
    session = make(scripted, compact_prompt="Keep file names.")
    scripted.add(summary_reply())
    body = compact(operator_api, session, strategy="local", instructions="and the test names")
    assert scripted.requests[0].json["input"][-1] == user_message("Keep file names.\n\nand the test names")
    assert body["prompt"] == {"name": "compact_prompt of policy prompted", "version": version("Keep file names.")}


@pytest.mark.django_db
def test_a_method_that_sends_no_prompt_records_none(operator_api, scripted):
    session = make(scripted, remote="v1", compact_prompt="Never sent.")
    scripted.add(Reply.json(200, {"output": [BODY[0], compaction("ENC-1")]}))
    remote = compact(operator_api, session, strategy="remote_v1")
    assert remote["prompt"] is None
    masked = compact(operator_api, make(scripted, name="masked", masking_keep_turns=0), strategy="masking")
    assert masked["prompt"] is None and len(scripted.requests) == 1  # plain masking calls no model


@pytest.mark.django_db
def test_the_inspector_shows_the_prompt_and_says_when_none_was_sent(operator_api, operator_user, scripted):
    scripted.add(summary_reply())
    local = compact(operator_api, make(scripted), strategy="local")
    masked = compact(operator_api, make(scripted, name="masked", masking_keep_turns=0), strategy="masking")
    client = Client()
    client.force_login(operator_user)
    page = client.get(f"/compactions/{local['id']}/").content.decode()
    assert "default (Codex&#x27;s SUMMARIZATION_PROMPT)" in page and f"version {version(SUMMARIZATION_PROMPT)}" in page
    page = client.get(f"/compactions/{masked['id']}/").content.decode()
    assert "none: observation masking (no model call) sent no summarisation prompt" in page


@pytest.mark.django_db
def test_the_policy_form_says_beside_each_field_which_methods_use_it(admin_user_role, policy):
    admin_user_role.is_staff = True
    admin_user_role.save()
    client = Client()
    client.force_login(admin_user_role)
    page = client.get(f"/admin/compaction_app/compactionpolicy/{policy.pk}/change/").content.decode()
    assert page.count("Used by:") >= 20
    help_text = page[page.index('class="help" id="id_compact_prompt_helptext"'):]
    # help texts are rendered as text (templates/admin/includes/fieldset.html): the apostrophe is escaped
    assert help_text.index("Used by: local summarisation, and masking&#x27;s summarising hybrid — never remote v1/v2") < (
        help_text.index("</div>"))
    assert "Used by: remote v2 only." in page and "Used by: observation masking only." in page
