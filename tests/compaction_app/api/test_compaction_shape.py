"""A compaction has one shape, the serializers', read from its row as attempts are (issue 43's fold, issue 47): the
list row, the detail and the compactions a rollback names keep the fields and formats the API always had."""

from __future__ import annotations

import pytest

from tests.compaction_app.api.test_prompt_recorded_api import compact, make, summary_reply

SUMMARY_FIELDS = {
    "id", "session", "rollout_seq", "item_id", "trigger", "reason", "phase", "implementation", "method", "strategy",
    "injection", "summary", "prompt", "extra_instructions", "tokens_before", "tokens_after", "tokens_freed",
    "window_number", "window_id", "previous_window_id", "first_window_id", "rolled_back", "inferred", "created_at",
    "retention", "probe_retention", "cost", "flagged",
}
LIST_FIELDS = SUMMARY_FIELDS | {"message", "replacement_history", "attempts"}
DETAIL_FIELDS = LIST_FIELDS | {"compacted_item", "replacement_tokens", "before_history", "before_tokens",
                               "window_change", "hook_runs", "session_net"}
ROW_COST = {"tokens_freed", "call_tokens", "probe_tokens", "reread_tokens", "price_per_million_tokens",
            "net_cost_saved"}
NET = {"requests_after", "tokens_saved_over_requests", "net_tokens", "net_formula", "net_open"}


@pytest.fixture
def scripted(served_script):
    return served_script


@pytest.mark.django_db
def test_list_detail_and_rollback_refs_keep_their_fields_and_formats(operator_api, support_api, scripted):
    session = make(scripted)
    scripted.add(summary_reply())
    first = compact(operator_api, session, strategy="local")
    scripted.add(summary_reply("S2"))
    second = compact(operator_api, session, strategy="local")

    (listed, _) = operator_api.get(f"/api/v1/sessions/{session.pk}/compactions").json()
    assert set(listed) == LIST_FIELDS
    assert set(listed["cost"]) == ROW_COST  # a list row has no net; its nullable net fields read null
    assert listed["cost"]["net_cost_saved"] is None and listed["strategy"] == "memento"
    assert listed["method"] == "local" and listed["session"] == session.pk and listed["previous_window_id"]
    assert listed["created_at"].endswith("+00:00")  # Python's isoformat, as since the first API

    detail = operator_api.get(f"/api/v1/compactions/{first['id']}").json()
    assert set(detail) == DETAIL_FIELDS and set(detail["cost"]) == ROW_COST | NET
    assert {k: detail[k] for k in SUMMARY_FIELDS - {"cost"}} == {k: listed[k] for k in SUMMARY_FIELDS - {"cost"}}
    assert set(first) == DETAIL_FIELDS  # the compact request answers with the detail

    preview = support_api.get(f"/api/v1/compactions/{first['id']}/rollback").json()
    (ref,) = preview["undoes"]
    assert ref == {"id": second["id"], "rollout_seq": second["rollout_seq"], "window_number": second["window_number"],
                   "window_id": second["window_id"], "trigger": "manual", "strategy": "local",
                   "created_at": second["created_at"]}
    refused = support_api.post(f"/api/v1/compactions/{first['id']}/rollback", {"reason": "x", "expect_undoes": []},
                               format="json")
    assert refused.status_code == 409 and refused.json()["error"]["undoes"] == [ref]
    done = support_api.post(f"/api/v1/compactions/{first['id']}/rollback",
                            {"reason": "x", "expect_undoes": [second["id"]]}, format="json").json()
    assert done["undoes"] == [ref]
