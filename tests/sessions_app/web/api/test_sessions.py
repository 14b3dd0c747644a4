"""The sessions JSON API (design: JSON API contract): create, list, read, history, append, rollout as JSON Lines."""

import json

from compaction_app.engine.tokens import counter
from sessions_app.models import LiveItem, RolloutLine, Session

USER = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hello"}]}
ENV = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context>x</environment_context>"}]}


def _create(client, provider, policy, **extra):
    body = {"title": "api session", "provider": provider.pk, "policy": policy.pk, **extra}
    return client.post("/api/v1/sessions", body, format="json")


def test_create_returns_the_live_summary_with_window_fields(operator_api, provider, policy):
    response = _create(operator_api, provider, policy, initial_context=[ENV], items=[USER], base_instructions="be brief")
    assert response.status_code == 201
    data = response.json()
    session = Session.objects.get(pk=data["id"])
    assert data["window_number"] == 0
    assert data["window_id"] == session.window_id == data["first_window_id"]
    assert data["previous_window_id"] is None
    assert data["context_window"] == 32000
    assert data["auto_compact_limit"] == 28800  # spec §2.2: 90% of the window when no limit is configured
    assert data["state"] == "idle"
    assert data["tokens_in_window"] == session.tokens_in_window > 0
    assert RolloutLine.objects.filter(session=session, actor__isnull=False).count() == 4  # meta, context, turn_context, item


def test_configured_limit_is_clamped_in_total_scope_and_kept_as_given_in_body_scope(operator_api, provider, policy, session):
    policy.auto_compact_token_limit = 90000
    policy.save()
    assert operator_api.get(f"/api/v1/sessions/{session.pk}").json()["auto_compact_limit"] == 28800
    policy.auto_compact_scope = "body_after_prefix"
    policy.save()
    assert operator_api.get(f"/api/v1/sessions/{session.pk}").json()["auto_compact_limit"] == 90000


def test_list_and_read(operator_api, make_session):
    a, b = make_session(title="a"), make_session(title="b")
    listed = operator_api.get("/api/v1/sessions").json()
    assert {s["id"] for s in listed} == {a.pk, b.pk}
    assert operator_api.get(f"/api/v1/sessions/{a.pk}").json()["title"] == "a"
    missing = operator_api.get("/api/v1/sessions/999999")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "not_found"


def test_the_list_pages_newest_first_with_a_next_link(operator_api, make_session):
    made = [make_session(title=f"s{n}") for n in range(5)]
    Session.objects.filter(pk=made[3].pk).update(state="running")
    first = operator_api.get("/api/v1/sessions?limit=2")
    assert [s["title"] for s in first.json()] == ["s4", "s3"]
    link = first["Link"]
    assert link.endswith(f'/api/v1/sessions?before={made[3].pk}&limit=2>; rel="next"')
    second = operator_api.get(link[1:link.index(">")])
    assert [s["title"] for s in second.json()] == ["s2", "s1"] and "Link" in second
    last = operator_api.get(f"/api/v1/sessions?before={made[1].pk}&limit=2")
    assert [s["title"] for s in last.json()] == ["s0"] and "Link" not in last  # the last page
    running = operator_api.get("/api/v1/sessions?state=running&limit=1")
    assert [s["title"] for s in running.json()] == ["s3"] and "Link" not in running


def test_a_bad_list_page_is_a_400_in_the_api_error_shape(operator_api, make_session):
    make_session()
    for query in ("limit=0", "limit=1001", "limit=x", "before=-1", f"before={2**64}"):
        response = operator_api.get(f"/api/v1/sessions?{query}")
        assert response.status_code == 400, query
        assert response.json()["error"]["code"] == "invalid", query
    assert operator_api.get("/api/v1/sessions?before=999999").json() == []  # no such session: an empty page


def test_append_items_then_history_returns_them_in_order(operator_api, session):
    reply = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hi there"}]}
    response = operator_api.post(
        f"/api/v1/sessions/{session.pk}/items",
        {"items": [USER, reply], "usage": {"input_tokens": 120, "output_tokens": 8, "total_tokens": 128}},
        format="json",
    )
    assert response.status_code == 201
    body = response.json()
    assert body["appended"] == 2
    assert body["session"]["tokens_in_window"] == 128
    history = operator_api.get(f"/api/v1/sessions/{session.pk}/history").json()
    assert history["items"][-2:] == [USER, reply] and history["next"] is None
    assert history["last_seq"] == Session.objects.get(pk=session.pk).last_seq


def test_an_invalid_item_gets_400_naming_index_and_field_and_nothing_is_stored(operator_api, session):
    lines = RolloutLine.objects.filter(session=session).count()
    bad = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": None}]}
    response = operator_api.post(f"/api/v1/sessions/{session.pk}/items", {"items": [USER, USER, USER, bad]}, format="json")
    assert response.status_code == 400
    assert response.json() == {"error": {"code": "invalid_item", "message": "items[3].content[0].text: must be a string"}}
    assert RolloutLine.objects.filter(session=session).count() == lines
    assert not LiveItem.objects.filter(session=session).exists()


def test_an_invalid_item_at_creation_creates_nothing(operator_api, provider, policy):
    response = _create(operator_api, provider, policy, items=[USER, {"type": "function_call", "name": "f"}])
    assert response.status_code == 400
    assert response.json()["error"] == {"code": "invalid_item", "message": "items[1].call_id: is required"}
    assert not Session.objects.exists()


def test_unknown_provider_is_a_clear_400(operator_api, policy):
    response = operator_api.post("/api/v1/sessions", {"title": "x", "provider": 999, "policy": policy.pk}, format="json")
    assert response.status_code == 400
    assert "provider" in response.json()["error"]["message"]


def test_rollout_is_json_lines_in_the_codex_line_shape(operator_api, make_session):
    session = make_session(items=[USER])
    response = operator_api.get(f"/api/v1/sessions/{session.pk}/rollout")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/x-ndjson"
    lines = [json.loads(line) for line in b"".join(response.streaming_content).decode().splitlines()]
    assert [line["seq"] for line in lines] == [1, 2]
    assert [line["type"] for line in lines] == ["session_meta", "response_item"]
    assert lines[1]["payload"] == USER
    assert set(lines[0]) == {"seq", "timestamp", "type", "payload"}
    assert lines[0]["timestamp"].endswith("Z")


def test_rollout_after_a_seq_streams_only_newer_lines(operator_api, make_session):
    session = make_session(items=[USER, USER, USER])
    response = operator_api.get(f"/api/v1/sessions/{session.pk}/rollout?after=2")
    seqs = [json.loads(line)["seq"] for line in b"".join(response.streaming_content).decode().splitlines()]
    assert seqs == [3, 4]


def test_token_counts_in_the_api_are_the_stored_exact_counts(operator_api, session):
    operator_api.post(f"/api/v1/sessions/{session.pk}/items", {"items": [USER]}, format="json")
    summary = operator_api.get(f"/api/v1/sessions/{session.pk}").json()
    assert summary["tokens_in_window"] == counter("o200k_base").count_item(USER)


def test_history_is_paged_by_position_with_a_next_cursor_until_the_end(operator_api, make_session, items_factory):
    session = make_session(items=[items_factory.user(f"item {n}") for n in range(1205)])
    whole = list(LiveItem.objects.filter(session=session).order_by("position").values_list("item", flat=True))
    pages, after = [], None
    while True:
        query = {"limit": 500} if after is None else {"limit": 500, "after": after}
        body = operator_api.get(f"/api/v1/sessions/{session.pk}/history", query).json()
        pages.append(body["items"])
        after = body["next"]
        if after is None:
            break
    assert [len(page) for page in pages] == [500, 500, len(whole) - 1000]
    assert [item for page in pages for item in page] == whole  # every item once, in order
    default = operator_api.get(f"/api/v1/sessions/{session.pk}/history").json()
    assert len(default["items"]) == 500 and default["next"] == 499  # a bounded page when no limit is given


def test_history_page_arguments_out_of_range_are_a_400_in_the_api_error_shape(operator_api, session):
    for query in ({"limit": 0}, {"limit": 1001}, {"after": "x"}, {"after": -2}, {"after": 2**63}):
        response = operator_api.get(f"/api/v1/sessions/{session.pk}/history", query)
        assert response.status_code == 400, query
        assert response.json()["error"]["code"] == "invalid"


def test_an_unknown_state_filter_is_a_400_naming_the_states(operator_api, make_session):
    make_session()
    response = operator_api.get("/api/v1/sessions?state=bogus")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid" and "state" in error["message"] and "bogus" in error["message"]
    assert operator_api.get("/api/v1/sessions?state=idle").status_code == 200
    assert operator_api.get("/api/v1/sessions?state=").status_code == 200
