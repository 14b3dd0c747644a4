"""A probe that disagrees with the structural check is shown as such (issue 46): in the compaction's JSON (each
model-judged fact with the structural verdict beside it, and the count) and on the inspector page, escaped."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from compaction_app.engine.items import user_message
from compaction_app.models import CompactionPolicy

SCRIPT = "<script>alert(1)</script>"
ITEMS = [
    user_message(f"Fix tests/billing/test_split.py {SCRIPT}"),
    {"type": "function_call", "call_id": "c1", "name": "read_file",
     "arguments": json.dumps({"path": "src/billing/split.py"})},
    {"type": "function_call_output", "call_id": "c1", "output": "def split(total, parts): ...\n" * 40},
    user_message("and summarise"),
]


@pytest.mark.django_db
def test_the_facts_probes_and_the_structural_check_disagree_on_are_listed_in_the_api_and_the_inspector(
        operator_api, operator_user, make_session, policy):
    CompactionPolicy.objects.filter(pk=policy.pk).update(retention_probes=True)
    session = make_session(items=ITEMS)
    response = operator_api.post(f"/api/v1/sessions/{session.pk}/compact", {"strategy": "remote_v1"}, format="json")
    assert response.status_code == 201, response.content
    probe = response.json()["probe_retention"]
    disagreeing = [f for f in probe["facts"] if f["disagrees"]]
    # The opaque remote item hides the file read from the structural check; the model remembers it.
    assert any(f["text"] == "src/billing/split.py" and f["kept"] and f["structural_kept"] is False
               for f in disagreeing)
    assert probe["disagreements"] == len(disagreeing) > 0
    assert all("structural_kept" in f for f in probe["facts"])
    client = Client()
    client.force_login(operator_user)
    body = client.get(f"/compactions/{response.json()['id']}/").content.decode()
    listed = body[body.index('id="probe-disagreements"'):]
    listed = listed[:listed.index("</ul>")]
    assert "disagree: probes say kept, the structural check lost: src/billing/split.py" in listed
    assert SCRIPT not in body
