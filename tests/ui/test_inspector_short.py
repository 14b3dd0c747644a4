"""The inspector is short enough to use (issue 47 item 9): its definitions fold into one line after the figures, a
forgotten fact is listed once, a category with nothing to score says "nothing to recall" (not "0 / 0"), a flag
names the pins it lost, and a net that grows between reloads says why. Its height at 1280 px is measured in the
browser test (tests/browser/test_operator_kinds_and_dark.py)."""

from __future__ import annotations

import json
import re

import pytest

from compaction_app.engine.items import user_message
from compaction_app.models import Compaction, CompactionPolicy
from compaction_app.templatetags.retention_ui import forgotten
from sessions_app.rollout.services import do_append_items


def call(call_id: str, command: str) -> dict:
    return {"type": "function_call", "call_id": call_id, "name": "shell",
            "arguments": json.dumps({"command": ["bash", "-lc", command]})}


def output(call_id: str, code: int) -> dict:
    return {"type": "function_call_output", "call_id": call_id,
            "output": f"Exit code: {code}\nWall time: 1 seconds\nOutput:\nFAILED test_split AssertionError\n"}


# The same failing run twice: one fact ("exit 1 of pytest -q"), however many items state it.
ITEMS = [user_message("Fix tests/billing/test_split.py"), call("c1", "pytest -q"), output("c1", 1),
         call("c2", "pytest -q"), output("c2", 1), user_message("now run ruff"), call("c3", "ruff check ."),
         output("c3", 0), user_message("and summarise")]


def _compact(operator_api, session, strategy: str) -> dict:
    response = operator_api.post(f"/api/v1/sessions/{session.pk}/compact", {"strategy": strategy}, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def _page(client, user, compaction_id: int) -> str:
    client.force_login(user)
    return client.get(f"/compactions/{compaction_id}/").content.decode()


@pytest.mark.django_db
def test_the_definitions_fold_after_the_figures_and_a_forgotten_fact_is_listed_once(client, operator_user,
                                                                                   operator_api, make_session):
    session = make_session(items=ITEMS)
    body = _compact(operator_api, session, "token_budget")
    page = _page(client, operator_user, body["id"])
    # Folded, and after the figures: the page opens on its numbers, not on six lines of definitions.
    assert '<details class="definitions" id="token-definitions"><summary>What these figures mean</summary>' in page
    assert page.index('id="tokens-before"') < page.index('id="token-definitions"')
    facts = page[page.index('id="forgotten-facts"'):]
    facts = facts[:facts.index("</ul>")]
    texts = [" ".join(re.sub(r"<[^>]+>", " ", li).split()) for li in facts.split("<li>")[1:]]
    assert len(texts) == len(set(texts)) and texts, texts
    # The same words stored as two kinds of fact (a cumulative score keeps an older compaction's facts) are one
    # line on the page.
    retention = body["retention"]
    fact = next(f for f in retention["facts"] if not f["kept"])
    twin = {**fact, "kind": "decision" if fact["kind"] != "decision" else "goal"}
    Compaction.objects.filter(pk=body["id"]).update(retention={**retention, "facts": [*retention["facts"], twin]})
    again = _page(client, operator_user, body["id"])
    listed = again[again.index('id="forgotten-facts"'):]
    listed = listed[:listed.index("</ul>")]
    assert listed.count(f": {fact['text']}</li>") == 1, listed
    assert len(forgotten(retention)) == len(texts)


@pytest.mark.django_db
def test_a_category_with_nothing_to_score_says_nothing_to_recall(client, operator_user, operator_api, make_session):
    session = make_session(items=ITEMS)
    body = _compact(operator_api, session, "token_budget")
    empty = [name for name, row in body["retention"]["categories"].items() if not row["total"]]
    assert empty, body["retention"]["categories"]  # the fixture leaves a category without facts
    page = _page(client, operator_user, body["id"])
    for name in empty:
        row = page[page.index(f'<tr data-category="{name}">'):]
        row = row[:row.index("</tr>")]
        assert "nothing to recall" in row and ">0<" not in row and "–" not in row


@pytest.mark.django_db
def test_a_lost_pin_is_named_in_the_flag(client, operator_user, operator_api, support_api, make_session, policy):
    CompactionPolicy.objects.filter(pk=policy.pk).update(pin_mode="check_only")
    session = make_session(items=ITEMS)
    support_api.post(f"/api/v1/sessions/{session.pk}/pins", {"text": "src/ledger.py"}, format="json")
    body = _compact(operator_api, session, "token_budget")
    assert body["flagged"] == "lost pin “src/ledger.py”"
    assert "flagged: lost pin “src/ledger.py”" in _page(client, operator_user, body["id"])


@pytest.mark.django_db
def test_a_net_that_grows_with_each_request_says_so_and_a_closed_one_does_not(client, operator_user, operator_api,
                                                                              make_session):
    session = make_session(items=ITEMS)
    first = _compact(operator_api, session, "token_budget")
    detail = operator_api.get(f"/api/v1/compactions/{first['id']}").json()
    assert detail["cost"]["net_open"] is True
    assert "Still counting" in _page(client, operator_user, first["id"])
    usage = {"input_tokens": 900, "output_tokens": 10, "total_tokens": 910}
    do_append_items(session=session, items=[user_message("go on")], usage=usage)
    grown = operator_api.get(f"/api/v1/compactions/{first['id']}").json()["cost"]
    assert grown["requests_after"] == detail["cost"]["requests_after"] + 1  # why it moved between two reloads
    second = _compact(operator_api, session, "token_budget")
    closed = operator_api.get(f"/api/v1/compactions/{first['id']}").json()["cost"]
    assert closed["net_open"] is False and "Still counting" not in _page(client, operator_user, first["id"])
    assert operator_api.get(f"/api/v1/compactions/{second['id']}").json()["cost"]["net_open"] is True
