"""A compaction's net return (issue 32): the compaction call's usage is in the rollout, and the net shown in the API
and the inspector is the tokens freed times the requests that followed, minus the call, the probes and the re-read
tax, priced with the provider's price per 1M tokens when it has one."""

from __future__ import annotations

import pytest
from django.test import Client

from compaction_app.models import Compaction, Provider
from sessions_app.models import RolloutLine
from sessions_app.turns.services import run_turn
from tests.compaction_app.api.test_alerts import compact
from tests.compaction_app.engine.fakes import FakeClient, assistant, completed, done

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fast(no_engine_sleeps):
    """Retries wait no real time."""


def test_the_compaction_calls_usage_is_a_rollout_line(operator_api, reader):
    body = compact(operator_api, reader, "local")
    usage = RolloutLine.objects.filter(session=reader, kind="event_msg", payload__type="compaction_usage").get()
    last = usage.payload["info"]["last_token_usage"]
    assert last["input_tokens"] > 0 and last["output_tokens"] > 0
    assert last["total_tokens"] == body["cost"]["call_tokens"] == last["input_tokens"] + last["output_tokens"]
    assert usage.seq > body["rollout_seq"]
    # Token budget calls no model: no usage line.
    compact(operator_api, reader, "token_budget")
    assert RolloutLine.objects.filter(session=reader, payload__type="compaction_usage").count() == 1


def test_the_net_counts_the_following_requests_and_subtracts_the_costs(operator_api, operator_user, reader):
    Provider.objects.filter(pk=reader.provider_id).update(price_per_million_tokens="2.5")
    body = compact(operator_api, reader, "local")
    Compaction.objects.filter(pk=body["id"]).update(reread_tokens=7)
    for n in range(3):
        client = FakeClient(streams=[[done(assistant(f"answer {n}")), completed(300 + n, 10)]])
        assert run_turn(session_id=reader.pk, user_input=f"go on {n}", client=client).ok
    detail = operator_api.get(f"/api/v1/compactions/{body['id']}").json()
    cost = detail["cost"]
    freed = detail["tokens_before"] - detail["tokens_after"]
    assert cost["requests_after"] == 3 and cost["tokens_saved_over_requests"] == freed * 3
    assert cost["net_tokens"] == freed * 3 - cost["call_tokens"] - cost["probe_tokens"] - 7
    assert cost["net_formula"].startswith(f"{freed:,} freed × 3 request(s) − {cost['call_tokens']:,} call")
    assert cost["price_per_million_tokens"] == 2.5
    assert cost["net_cost_saved"] == pytest.approx(cost["net_tokens"] * 2.5 / 1_000_000)
    assert detail["session_net"] == {"compactions": 1, "net_tokens": cost["net_tokens"],
                                     "net_cost_saved": pytest.approx(cost["net_cost_saved"])}
    page = Client()
    page.force_login(operator_user)
    html = page.get(f"/compactions/{body['id']}/").content.decode()
    assert 'id="net-formula"' in html and f"{cost['net_tokens']} tok" in html


def test_a_second_compaction_ends_the_first_ones_requests(operator_api, reader):
    first = compact(operator_api, reader, "local")
    client = FakeClient(streams=[[done(assistant("one")), completed(300, 10)]])
    assert run_turn(session_id=reader.pk, user_input="go", client=client).ok
    compact(operator_api, reader, "token_budget")
    client = FakeClient(streams=[[done(assistant("two")), completed(200, 10)]])
    assert run_turn(session_id=reader.pk, user_input="again", client=client).ok
    assert operator_api.get(f"/api/v1/compactions/{first['id']}").json()["cost"]["requests_after"] == 1
