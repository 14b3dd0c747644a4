"""The operator's extra compaction instructions are recorded (issue 47, item 6): the API's compaction shows them,
the rollout's `compacted` line carries them, an export and re-import keeps them, and the inspector shows them
beside the prompt they were appended to, which it links (its text, and for an admin the page holding it)."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from compaction_app.engine.items import user_message
from compaction_app.engine.prompts import SUMMARIZATION_PROMPT, prompt_version
from compaction_app.models import Compaction, Prompt
from sessions_app.models import RolloutLine, Session
from tests.compaction_app.api.test_prompt_recorded_api import compact, make, summary_reply

INSTRUCTIONS = "Keep <the> test names & the failing assertion."


@pytest.fixture
def scripted(served_script):
    return served_script


def _page(user, compaction_id: int) -> str:
    client = Client()
    client.force_login(user)
    response = client.get(f"/compactions/{compaction_id}/")
    assert response.status_code == 200
    return response.content.decode()


@pytest.mark.django_db
def test_the_api_and_the_rollout_record_the_extra_instructions_a_compaction_was_given(operator_api, scripted):
    session = make(scripted)
    scripted.add(summary_reply())
    made = compact(operator_api, session, strategy="local", instructions=f"  {INSTRUCTIONS}\n")
    assert scripted.requests[0].json["input"][-1] == user_message(f"{SUMMARIZATION_PROMPT.rstrip()}\n\n{INSTRUCTIONS}")
    assert made["extra_instructions"] == INSTRUCTIONS  # what the prompt was given: stripped as it was appended
    assert operator_api.get(f"/api/v1/compactions/{made['id']}").json()["extra_instructions"] == INSTRUCTIONS
    (listed,) = operator_api.get(f"/api/v1/sessions/{session.pk}/compactions").json()
    assert listed["extra_instructions"] == INSTRUCTIONS
    line = RolloutLine.objects.get(session=session, seq=made["rollout_seq"])
    assert line.kind == "compacted" and line.payload["extra_instructions"] == INSTRUCTIONS

    scripted.add(summary_reply("S2"))
    plain = compact(operator_api, session, strategy="local")
    assert plain["extra_instructions"] is None
    assert "extra_instructions" not in RolloutLine.objects.get(session=session, seq=plain["rollout_seq"]).payload


@pytest.mark.django_db
def test_an_export_keeps_them_beside_codexs_compacted_line_and_a_re_import_reads_them_back(
        operator_api, support_api, scripted, django_capture_on_commit_callbacks):
    session = make(scripted)
    scripted.add(summary_reply())
    made = compact(operator_api, session, strategy="local", instructions=INSTRUCTIONS)
    exported = b"".join(operator_api.get(f"/api/v1/sessions/{session.pk}/export").streaming_content)
    lines = [json.loads(x) for x in exported.splitlines()]
    at = next(i for i, x in enumerate(lines) if x["type"] == "compacted")
    assert "extra_instructions" not in lines[at]["payload"]  # Codex's CompactedItem fields only
    assert lines[at + 1]["payload"] == {"type": "compactweb_line", "kind": "compacted", "seq": made["rollout_seq"],
                                        "payload": {"extra_instructions": INSTRUCTIONS}}

    with django_capture_on_commit_callbacks(execute=True):
        response = support_api.post("/api/v1/sessions/import", {
            "file": SimpleUploadedFile("rollout.jsonl", exported), "new_thread_id": "true"})
    assert response.status_code == 201, response.content
    copy = Session.objects.get(pk=response.json()["session"])
    (imported,) = Compaction.objects.filter(session=copy)
    assert operator_api.get(f"/api/v1/compactions/{imported.pk}").json()["extra_instructions"] == INSTRUCTIONS
    line = RolloutLine.objects.get(session=copy, seq=imported.rollout_seq)
    assert line.payload["extra_instructions"] == INSTRUCTIONS
    # the marker event was merged back into its line, not kept as an event of its own
    assert not RolloutLine.objects.filter(session=copy, payload__type="compactweb_line").exists()


@pytest.mark.django_db
def test_the_inspector_shows_the_extra_instructions_escaped_and_the_prompts_text(operator_api, operator_user,
                                                                                 scripted):
    scripted.add(summary_reply())
    made = compact(operator_api, make(scripted), strategy="local", instructions=INSTRUCTIONS)
    page = _page(operator_user, made["id"])
    assert ('<pre class="summary-text" id="extra-instructions" tabindex="0" aria-label="extra instructions">'
            "Keep &lt;the&gt; test names &amp; the failing assertion.</pre>") in page
    assert 'href="#prompt-text" id="prompt-text-link">its text</a>' in page
    assert "Prompt text: default (Codex&#x27;s SUMMARIZATION_PROMPT)" in page
    assert 'id="prompt-link"' not in page  # an operator cannot open the admin


@pytest.mark.django_db
def test_an_admin_opens_the_stored_prompt_a_compaction_used_and_sees_when_it_was_edited_since(
        operator_api, admin_user_role, scripted):
    prompt = Prompt.objects.create(name="terse", text="Summarise tersely.")
    session = make(scripted, prompt=prompt)
    scripted.add(summary_reply())
    made = compact(operator_api, session, strategy="local")
    page = _page(admin_user_role, made["id"])
    assert (f'<a href="/admin/compaction_app/prompt/{prompt.pk}/change/" id="prompt-link" '
            'title="where this prompt is configured">terse</a>') in page
    assert "Summarise tersely." in page

    Prompt.objects.filter(pk=prompt.pk).update(text="Summarise very tersely.")
    page = _page(admin_user_role, made["id"])
    assert f"/admin/compaction_app/prompt/{prompt.pk}/change/" in page
    assert (f"edited since: now version {prompt_version('Summarise very tersely.')}; the text this compaction "
            "used is no longer stored") in page
    assert 'id="prompt-text"' not in page


@pytest.mark.django_db
def test_a_policys_own_compact_prompt_links_to_that_policy(operator_api, admin_user_role, scripted):
    session = make(scripted, compact_prompt="Keep file names.")
    scripted.add(summary_reply())
    made = compact(operator_api, session, strategy="local")
    page = _page(admin_user_role, made["id"])
    assert f'<a href="/admin/compaction_app/compactionpolicy/{session.policy_id}/change/" id="prompt-link"' in page
    assert "Keep file names." in page
