"""Issue 41: in compactweb mode a compaction leaves Codex room to work, or the route's fallback runs.

Codex asks for a compaction when its request reaches its limit, and asks again at every request while it is still
over it; a compaction that frees too little (masking with small tool outputs beside big messages) would have it ask
at almost every request. So the gateway checks what the policy's compaction leaves (at most half the history the
client's limit leaves room for) before it is installed, and otherwise falls back as the route says: local
summarisation, or Codex's own request forwarded to the upstream. What cannot be brought under the client's limit
at all is a 400 `compaction_refused` Codex shows as the gateway's reason. Through the gateway's HTTP path, against
the simulated model as the upstream (and, for local summarisation, as the route's model)."""

from __future__ import annotations

import pytest

from compaction_app.models import Compaction, CompactionAttempt, CompactionPolicy, Provider
from gateway_app import compaction as gateway_compaction
from gateway_app.compaction import TARGET_PERCENT
from gateway_app.keys import do_create_gateway_key
from gateway_app.models import CompactionHandle, GatewayAttempt, GatewayRoute
from sessions_app.compactions.services import SHORT_OF_TARGET_KIND
from tests.gateway_app.conftest import logged_by, make_route
from tests.gateway_app.test_recording import TRIGGER, Codex, _events, gateway_session, live, wire

pytestmark = pytest.mark.django_db(transaction=True)

# Short tool outputs among the model's own traffic: masking them frees too little (a placeholder is about half of
# each), while a summary keeps only the user's few words.
PROMPTS = ("please fix parser bug 3", "now write the docs for the loader", "check the tests and report")


def _masking(name: str, **fields) -> CompactionPolicy:
    return CompactionPolicy.objects.create(name=name, strategy="masking", masking_keep_turns=0, **fields)


def _embedded_route(name: str, policy: CompactionPolicy, **fields) -> GatewayRoute:
    """A compactweb route whose model (for local summarisation) is the embedded simulated model."""
    provider = Provider.objects.create(name=f"embedded-{name}", base_url="embedded", model="compactweb-sim",
                                       context_window=32000)
    return GatewayRoute.objects.create(name=name, provider=provider, policy=policy, compaction_mode="compactweb",
                                       **fields)


# Codex's own context at the start of its history, put back before the compaction item after a compaction.
PERMISSIONS = {"type": "message", "role": "developer", "content": [
    {"type": "input_text", "text": "<permissions instructions>sandbox_mode is workspace-write</permissions instructions>"}]}
ENVIRONMENT = {"type": "message", "role": "user", "content": [
    {"type": "input_text", "text": "<environment_context>\n  <cwd>/home/alice/parser</cwd>\n</environment_context>"}]}


def _codex_over_its_limit(route: GatewayRoute) -> Codex:
    codex = Codex(do_create_gateway_key(route=route, client_name="ci").key, output_lines=30)
    codex.history = [PERMISSIONS, ENVIRONMENT]
    for prompt in PROMPTS:
        codex.turn(prompt)
        codex.turn()
    return codex


def _asks_and_rooms(monkeypatch) -> tuple[list, list]:
    """What the gateway asks of the engine (passed on unchanged) and the rooms it read before asking."""
    asks, rooms = [], []
    real, real_room = gateway_compaction.acompact_session, gateway_compaction.room_of

    async def asked(*, session_id, ask):
        asks.append(ask)
        return await real(session_id=session_id, ask=ask)

    def read(*, session_id):
        rooms.append(real_room(session_id=session_id))
        return rooms[-1]

    monkeypatch.setattr(gateway_compaction, "acompact_session", asked)
    monkeypatch.setattr(gateway_compaction, "room_of", read)
    return asks, rooms


def _tokens(session, items) -> int:
    from sessions_app.rollout.services import counter_for

    count = counter_for(session)
    return sum(count.count_item(i) for i in items)


def test_a_masking_that_frees_too_little_is_not_installed_and_local_summarisation_leaves_room(
        sim_upstream, db, monkeypatch):
    route = _embedded_route("team-room", _masking("masking-room"))
    codex = _codex_over_its_limit(route)
    session = gateway_session()
    history = list(codex.history)
    asks, rooms = _asks_and_rooms(monkeypatch)
    with logged_by("gateway_app.compaction") as logged:
        response = codex.post([*history, TRIGGER], kind="compaction")
    assert response.status_code == 200, response.text
    (item,) = [e["item"] for e in _events(response.text) if e["type"] == "response.output_item.done"]
    assert item["encrypted_content"].startswith("cwgh_")
    assert item["id"] == "cmp_" + item["encrypted_content"].removeprefix("cwgh_")[:24]  # an id as OpenAI's are
    (why,) = [r.getMessage() for r in logged]
    assert why.startswith(f"gateway session {session.pk}: the policy's compaction could not leave Codex room to work")
    assert why.endswith("; compacting by local summarisation instead")
    # The masking was refused before it was installed, and says why; summarisation ran instead.
    (refused,) = CompactionAttempt.objects.filter(session=session, error_kind=SHORT_OF_TARGET_KIND)
    assert refused.strategy == "masking" and "left" in refused.error_message
    (compaction,) = Compaction.objects.filter(session=session)
    assert compaction.strategy == "local"
    # The masking was asked for the target; the summary after it for under the client's limit (one token under).
    (room,) = rooms
    assert [(a.strategy, a.max_history_tokens) for a in asks] == [(None, room.target), ("local", room.limit - 1)]
    # What the upstream will see is at most the target share of the history Codex asked to compact.
    replacement = CompactionHandle.objects.get(handle=item["encrypted_content"]).replacement
    assert _tokens(session, replacement) <= _tokens(session, history) * TARGET_PERCENT // 100
    assert PERMISSIONS not in replacement and ENVIRONMENT not in replacement  # a summary keeps the user's words
    # Codex keeps its real user messages and puts its context back before the compaction item (spec §4.3, §5.3).
    codex.history = [PERMISSIONS, *[i for i in history if i.get("role") == "user"], item]
    codex.turn("and go on")
    received = sim_upstream.requests()[-1]["body"]["input"]
    # The upstream sees the summary's history, then Codex's own context (not dropped with what the handle
    # replaced), then the new turn; and that is what is recorded.
    assert [wire(i) for i in received[1:-1]] == [wire(i) for i in [*replacement, PERMISSIONS, ENVIRONMENT]]
    assert live(session)[:len(received) - 1] == [wire(i) for i in received[1:]]


def test_a_route_that_says_upstream_forwards_what_its_policy_cannot_compact_enough(sim_upstream, db):
    route = make_route(mode="compactweb", policy=_masking("masking-forward"))
    route.compaction_fallback = GatewayRoute.Fallback.UPSTREAM
    route.save()
    codex = _codex_over_its_limit(route)
    before = len(sim_upstream.requests())
    with logged_by("gateway_app.compaction") as logged:
        item = codex.compact_v2()
    (why,) = [r.getMessage() for r in logged]
    assert why.startswith("gateway session ") and why.endswith("; forwarding the compaction to the upstream")
    assert "the policy's compaction could not leave Codex room to work" in why
    # The upstream got Codex's compaction request and its own compaction item went back to Codex.
    forwarded = sim_upstream.requests()[before:]
    assert [r["body"]["input"][-1]["type"] for r in forwarded] == ["compaction_trigger"]
    assert not item["encrypted_content"].startswith("cwgh_")
    codex.turn("now the docs")
    session = gateway_session()
    assert CompactionAttempt.objects.filter(session=session, error_kind=SHORT_OF_TARGET_KIND,
                                            strategy="masking").exists()
    # The compaction Codex installed is recorded as the upstream's, and the record says why it went there.
    (compaction,) = Compaction.objects.filter(session=session)
    assert (compaction.implementation, compaction.strategy) == ("responses_compaction_v2", "remote_v2")
    assert "compactweb mode forwarded it to the upstream" in compaction.inferred["implementation"]
    assert not CompactionHandle.objects.exists()
    last = sim_upstream.requests()[-1]["body"]["input"][1:]
    assert live(session)[:len(last)] == [wire(i) for i in last]
    assert session.gateway.requests == len(sim_upstream.requests())  # each request counted once


def test_what_not_even_summarisation_brings_under_the_clients_limit_is_a_400_codex_shows(sim_upstream, db):
    # A policy limit the base instructions and the user's own words already fill: nothing can leave room.
    route = _embedded_route("team-full", _masking("masking-full", auto_compact_token_limit=60))
    codex = _codex_over_its_limit(route)
    session = gateway_session()
    response = codex.post([*codex.history, TRIGGER], kind="compaction")
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "compaction_refused"
    assert error["message"].startswith(f"compactweb gateway: route {route.name}'s policy cannot compact this session")
    assert "not even a summary brings the history under the client's limit" in error["message"]
    assert not Compaction.objects.filter(session=session).exists()
    assert live(session) == [wire(i) for i in codex.history]  # the request's history, no partial replacement
    assert GatewayAttempt.objects.filter(status=400, request_kind="compaction_v2").exists()


def test_a_summarising_policy_summarises_once_and_its_summary_need_only_be_under_the_clients_limit(
        sim_upstream, db, monkeypatch):
    # The user wrote at length: a summary keeps their words, so it cannot reach the target, only the limit. The
    # policy's own summary is what the fallback would make again: it is installed, not made twice.
    route = _embedded_route("team-summary", CompactionPolicy.objects.create(name="summary", strategy="local"))
    asks, rooms = _asks_and_rooms(monkeypatch)
    codex = Codex(do_create_gateway_key(route=route, client_name="ci").key, output_lines=60)
    codex.turn("please fix parser bug 3; " + "the loader reads the config twice and drops the last line. " * 30)
    codex.turn()
    session = gateway_session()
    item = codex.compact_v2()
    assert item["encrypted_content"].startswith("cwgh_")
    (compaction,) = Compaction.objects.filter(session=session)
    assert compaction.strategy == "local"
    assert CompactionAttempt.objects.filter(session=session).count() == 1  # one summary, one model call
    replacement = CompactionHandle.objects.get(handle=item["encrypted_content"]).replacement
    history = [i for i in codex.sent[-1][1:-1]]
    assert _tokens(session, history) * TARGET_PERCENT // 100 < _tokens(session, replacement) < _tokens(session, history)
    # Under the client's limit means one token under it at most (the room the gateway reads), asked as the
    # automatic compaction a context limit calls for.
    (ask,), (room,) = asks, rooms
    assert ask.max_history_tokens == room.limit - 1
    assert (ask.trigger, ask.reason, compaction.reason) == ("auto", "context_limit", "context_limit")


def test_a_summarising_policys_summary_that_cannot_fit_the_clients_limit_is_a_400_saying_the_room_left(
        sim_upstream, db, monkeypatch):
    """The policy summarises and the route falls back to summarising: its one summary is the last resort, so one
    that cannot come under the client's limit is refused at once, the message saying how much room the limit
    leaves (no second summary made)."""
    policy = CompactionPolicy.objects.create(name="summary-full", strategy="local", auto_compact_token_limit=60)
    route = _embedded_route("team-summary-full", policy)
    asks, rooms = _asks_and_rooms(monkeypatch)
    codex = _codex_over_its_limit(route)
    session = gateway_session()
    response = codex.post([*codex.history, TRIGGER], kind="compaction")
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "compaction_refused"
    (room,) = rooms
    assert "not even a summary brings the history under the client's limit" in error["message"]
    assert f"(the limit leaves room for {room.limit:,} tokens of history)" in error["message"]
    assert [a.max_history_tokens for a in asks] == [max(0, room.limit - 1)]  # one summary asked, not two
    assert not Compaction.objects.filter(session=session).exists()


def test_a_session_with_no_history_leaves_a_compaction_no_room(sim_upstream, db):
    from sessions_app.models import LiveItem

    route = _embedded_route("team-empty", _masking("masking-empty"))
    codex = Codex(do_create_gateway_key(route=route, client_name="ci").key)
    codex.turn("please fix parser bug 3")
    session = gateway_session()
    LiveItem.objects.filter(session=session).delete()
    room = gateway_compaction.room_of(session_id=session.pk)
    assert (room.limit, room.target) == (0, 0)


def test_the_room_is_the_history_capped_by_ninety_percent_of_the_window_less_the_base_instructions(sim_upstream, db):
    """The client's limit is at most the route model's auto-compact limit (90% of its window, spec §2.2) less the
    base instructions, which every request carries whatever is compacted; the target is half of it, in whole
    tokens."""
    from compaction_app.engine.thresholds import auto_compact_limit
    from sessions_app.rollout.services import counter_for

    route = _embedded_route("team-window", _masking("masking-window"))
    codex = _codex_over_its_limit(route)
    session = gateway_session()
    history = gateway_compaction.room_of(session_id=session.pk).history
    route.provider.context_window = history  # 90% of it, less the base instructions, is under the history
    route.provider.save()
    session.refresh_from_db()
    base = counter_for(session).count_text(session.base_instructions)
    assert base > 0 and codex.sent[-1][0]["content"][0]["text"] == session.base_instructions

    room = gateway_compaction.room_of(session_id=session.pk)

    assert room.history == history and room.limit == history * 9 // 10 - base
    assert auto_compact_limit(history, None) == history * 9 // 10
    assert room.target == room.limit * TARGET_PERCENT // 100 and isinstance(room.target, int)


def test_the_room_is_read_in_a_query_for_the_session_with_its_provider_and_policy_and_one_for_its_tokens(
        sim_upstream, db, django_assert_num_queries):
    """room_of runs on the gateway's one lookup thread (gateway_app.lookups), as every compaction starts: the
    session comes with the provider and policy the limit and the strategy are read from, not a query each."""
    route = _embedded_route("team-queries", _masking("masking-queries"))
    _codex_over_its_limit(route)
    session = gateway_session()
    with django_assert_num_queries(2):
        room = gateway_compaction.room_of(session_id=session.pk)
    assert room.history > 0 and not room.summarises


def test_a_compaction_codex_asks_for_in_the_middle_of_a_turn_is_recorded_mid_turn(sim_upstream, db):
    """The phase is read from the history the compaction request carries (spec §2.4): one that ends in a tool's
    output is a turn under way (mid-turn), not one about to start."""
    route = _embedded_route("team-phase", CompactionPolicy.objects.create(name="summary-phase", strategy="local"))
    codex = Codex(do_create_gateway_key(route=route, client_name="ci").key, output_lines=60)
    codex.turn("please fix parser bug 3")
    assert codex.history[-1]["type"] == "function_call_output"
    codex.compact_v2()
    (compaction,) = Compaction.objects.filter(session=gateway_session())
    assert compaction.phase == "mid_turn"


def test_a_policy_limit_the_base_instructions_alone_fill_leaves_no_room(sim_upstream, db):
    route = _embedded_route("team-base-full", _masking("masking-base-full", auto_compact_token_limit=1))
    Codex(do_create_gateway_key(route=route, client_name="ci").key).turn("please fix parser bug 3")
    room = gateway_compaction.room_of(session_id=gateway_session().pk)
    assert room.history > 0 and (room.limit, room.target) == (0, 0)
