"""The rollout upload page and the replay comparison page (operator role)."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from compaction_app.models import CompactionPolicy
from sessions_app.models import Session


@pytest.fixture
def operator_client(client, operator_user):
    client.force_login(operator_user)
    return client


def test_the_import_page_needs_a_login_and_renders_the_form(client, operator_client, provider, policy):
    page = operator_client.get("/import/")
    assert page.status_code == 200 and 'type="file"' in page.content.decode()


def test_uploading_a_rollout_imports_it_and_opens_the_session(operator_client, rollout_bytes, provider, policy):
    response = operator_client.post("/import/", {
        "file": SimpleUploadedFile("rollout.jsonl", rollout_bytes("compactions.jsonl")),
        "provider": provider.pk, "policy": policy.pk,
    })
    session = Session.objects.get(source="imported")
    assert response.status_code == 302 and response["Location"] == f"/sessions/{session.pk}/"


def test_a_bad_upload_in_strict_mode_lists_its_bad_lines_and_imports_nothing(
    operator_client, rollout_bytes, provider, policy, row_counts
):
    before = row_counts()
    response = operator_client.post("/import/", {
        "file": SimpleUploadedFile("bad.jsonl", rollout_bytes("malformed_bad_json.jsonl")), "strict": "1",
    })
    assert response.status_code == 400
    page = response.content.decode()
    assert "Nothing was imported." in page and 'id="import-errors"' in page and "<td class=\"num\">3</td>" in page
    assert row_counts() == before


def test_the_replay_page_starts_a_replay_and_shows_the_comparison(operator_client, make_session, add_turn):
    original = make_session()
    for n in range(4):
        add_turn(original, n, size=80)
    tight = CompactionPolicy.objects.create(name="tight", auto_compact_token_limit=600, strategy="remote_v1")

    response = operator_client.post(f"/sessions/{original.pk}/replays/", {"policy": tight.pk})

    replay = Session.objects.get(source="replay")
    assert response.status_code == 302 and response["Location"] == f"/sessions/{replay.pk}/replays/"
    page = operator_client.get(f"/sessions/{original.pk}/replays/").content.decode()
    assert f'id="comparison-{replay.pk}"' in page and "Tokens saved" in page
    assert operator_client.get(f"/sessions/{replay.pk}/replays/").status_code == 200


def test_an_import_refusal_is_shown_inside_the_form_with_or_without_htmx(operator_client, rollout_bytes, row_counts):
    before = row_counts()
    upload = {"file": SimpleUploadedFile("bad.jsonl", rollout_bytes("malformed_bad_json.jsonl")), "strict": "1"}
    page = operator_client.post("/import/", upload).content.decode()
    form = page[page.index('id="import-form"'):page.index("</form>", page.index('id="import-form"'))]
    assert 'id="import-errors"' in form and "Nothing was imported." in form

    upload["file"] = SimpleUploadedFile("bad.jsonl", rollout_bytes("malformed_bad_json.jsonl"))
    response = operator_client.post("/import/", upload, HTTP_HX_REQUEST="true")
    fragment = response.content.decode()
    assert response.status_code == 400 and fragment.lstrip().startswith('<form id="import-form"')
    assert 'id="import-errors"' in fragment and "<html" not in fragment
    assert row_counts() == before


def test_an_import_with_htmx_goes_to_the_new_session(operator_client, rollout_bytes, provider, policy):
    response = operator_client.post("/import/", {
        "file": SimpleUploadedFile("rollout.jsonl", rollout_bytes("compactions.jsonl")),
        "provider": provider.pk, "policy": policy.pk,
    }, HTTP_HX_REQUEST="true")
    session = Session.objects.get(source="imported")
    assert response.status_code == 204 and response["HX-Redirect"] == f"/sessions/{session.pk}/"


def test_a_replay_without_a_policy_says_why_inside_the_replay_form(operator_client, make_session, add_turn):
    original = make_session()
    add_turn(original, 0)
    response = operator_client.post(f"/sessions/{original.pk}/replays/", {"policy": "9999"})
    page = response.content.decode()
    form = page[page.index('id="replay-form"'):page.index("</form>", page.index('id="replay-form"'))]
    assert response.status_code == 400 and "Not replayed: Choose the policy to replay under." in form
    assert not Session.objects.filter(source="replay").exists()
