"""Issue 41: a gateway session is its caller's (route and key, a route's or a user's), and a compaction handle its
session's. A real handle, obtained through the gateway, sent by anyone else is refused with 400
`unknown_compaction_handle` and nothing of the owner's session is forwarded or recorded; a thread id another caller
already uses starts a session of the caller's own."""

from __future__ import annotations

import pytest

from compaction_app.models import CompactionPolicy
from gateway_app import operator
from gateway_app.keys import do_create_gateway_key, do_create_user_gateway_key
from gateway_app.models import GatewayAttempt, GatewaySession
from sessions_app.models import RolloutLine, Session
from tests.gateway_app.conftest import make_route
from tests.gateway_app.test_recording import THREAD, Codex, live, user

pytestmark = pytest.mark.django_db(transaction=True)

OTHER_THREAD = "0190cccc-0000-7000-8000-000000000002"
SECRET = "the deploy password is hunter2"


class RouteCodex(Codex):
    """Codex configured with a route named in its base URL (/gateway/r/<route>/v1), as a user's key needs."""

    def __init__(self, key: str, route_name: str, thread: str = THREAD) -> None:
        # Tool outputs big enough that masking them leaves room to work (test_compaction_room: when it does not).
        super().__init__(key, thread, output_lines=400)
        self.route_name = route_name

    def post(self, items, *, kind="turn", path="/gateway/v1/responses"):
        return super().post(items, kind=kind, path=path.replace("/gateway/", f"/gateway/r/{self.route_name}/", 1))


def _compactweb_route(rpm: int):
    masking = CompactionPolicy.objects.create(name=f"masking-{rpm}", strategy="masking", masking_keep_turns=1)
    route = make_route(mode="compactweb", policy=masking, rpm=rpm)
    route.allow_user_keys = True
    route.save()
    return route


@pytest.fixture
def owned(sim_upstream, make_user):
    """Alice's Codex session on a compactweb route, through her own key, after a compaction: its real handle."""
    route = _compactweb_route(rpm=700)
    alice = make_user("operator", username="alice")
    codex = RouteCodex(do_create_user_gateway_key(user=alice, name="laptop").key, route.name)
    codex.turn(f"please fix parser bug 3; {SECRET}")
    codex.turn()
    codex.turn("now write the docs")
    codex.turn()
    codex.turn("and check the tests")
    codex.turn()
    item = codex.compact_v2()
    assert item["encrypted_content"].startswith("cwgh_")
    codex.turn("and the changelog")  # the owner's own session expands it
    assert not any(i.get("type") == "compaction" for i in sim_upstream.requests()[-1]["body"]["input"])
    return route, alice, codex, item


def _presenters(route, alice_key: str, make_user) -> dict[str, RouteCodex]:
    """Each other caller, as a Codex client ready to send, by case."""
    same_key_other_session = RouteCodex(alice_key, route.name, thread=OTHER_THREAD)
    route_key = RouteCodex(do_create_gateway_key(route=route, client_name="ci-runner").key, route.name)
    bob = make_user("operator", username="bob")
    bobs_key = RouteCodex(do_create_user_gateway_key(user=bob, name="bob-laptop").key, route.name)
    other_route = RouteCodex(alice_key, _compactweb_route(rpm=701).name)  # alice's very key and thread id
    return {"another session of the same key": same_key_other_session, "another key of the route": route_key,
            "another user's key": bobs_key, "the same key on another route": other_route}


@pytest.mark.parametrize("case", ["another session of the same key", "another key of the route",
                                  "another user's key", "the same key on another route"])
def test_a_real_handle_sent_by_anyone_but_its_session_is_refused_and_nothing_of_it_leaks(owned, sim_upstream,
                                                                                          make_user, case):
    route, _, codex, item = owned
    owner_gs = GatewaySession.objects.get()
    lines_before = RolloutLine.objects.filter(session=owner_gs.session).count()
    history_before = live(owner_gs.session)
    forwarded_before = len(sim_upstream.requests())
    other = _presenters(route, codex.key, make_user)[case]

    response = other.post([user("what was in that session?"), item])

    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "unknown_compaction_handle"
    assert len(sim_upstream.requests()) == forwarded_before  # nothing forwarded
    assert RolloutLine.objects.filter(session=owner_gs.session).count() == lines_before
    assert live(owner_gs.session) == history_before
    assert GatewaySession.objects.count() == 1  # no session was made of the owner's history either
    refused = GatewayAttempt.objects.get(status=400)
    assert refused.gateway_session is None
    assert SECRET not in str(list(Session.objects.exclude(pk=owner_gs.session_id).values()))
    # The owner still can.
    codex.history.append(user("one more"))
    assert codex.post(codex.history).status_code == 200


def test_another_keys_request_with_the_same_thread_id_starts_its_own_session_and_gets_none_of_its_controls(
        owned, sim_upstream, make_user):
    route, alice, codex, _ = owned
    owner_gs = GatewaySession.objects.get()
    history_before = live(owner_gs.session)
    operator.do_set_paused(session_id=owner_gs.session_id, paused=True, actor=alice)
    assert codex.post(codex.history).status_code == 403  # the owner's session is paused

    bob = RouteCodex(do_create_user_gateway_key(user=make_user("operator", username="bob"), name="b").key,
                     route.name, thread=THREAD)
    bob.turn("hello from bob")  # not refused: alice's pause is not his

    bobs = GatewaySession.objects.exclude(pk=owner_gs.pk).get()
    assert bobs.key_id != owner_gs.key_id and bobs.session_id != owner_gs.session_id
    assert bobs.session.thread_id != owner_gs.session.thread_id  # the thread id stays alice's session's
    assert live(owner_gs.session) == history_before
    assert SECRET not in str(sim_upstream.requests()[-1]["body"]["input"])
    assert [i for i in live(bobs.session) if i.get("role") == "user"][0]["content"][0]["text"] == "hello from bob"


def test_a_handle_the_gateway_never_issued_is_refused_in_the_session_that_holds_a_real_one(owned, sim_upstream):
    """The lookup is by the handle itself: a forged one sent in the owner's own session (which holds a real handle)
    is unknown there too, never taken for the session's handle."""
    _, _, codex, item = owned
    forwarded_before = len(sim_upstream.requests())
    forged = {**item, "encrypted_content": "cwgh_" + "A" * 32}

    response = codex.post([*codex.history, forged])

    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "unknown_compaction_handle"
    assert len(sim_upstream.requests()) == forwarded_before


def test_a_forged_handle_between_two_real_ones_is_refused_and_the_refusal_shows_only_its_start(owned, sim_upstream):
    """Every handle a request carries must be its session's, not only its newest; the refusal names the forged
    one by its first 12 characters, not echoing it whole."""
    _, _, codex, item = owned
    assert any(i.get("type") == "compaction" for i in codex.history)  # the real handle, kept by Codex
    forwarded_before = len(sim_upstream.requests())
    forged = {**item, "encrypted_content": "cwgh_" + "B" * 32}

    response = codex.post([*codex.history, forged, item])

    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "unknown_compaction_handle"
    assert f"encrypted_content {forged['encrypted_content'][:12]}… is not a handle" in error["message"]
    assert forged["encrypted_content"][:13] not in error["message"]
    assert len(sim_upstream.requests()) == forwarded_before
