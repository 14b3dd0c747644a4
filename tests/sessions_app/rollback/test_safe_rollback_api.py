"""The API's rollback is no footgun (issue 47, item 4): a reason is required, a rollback that would undo later
compactions must name them (`expect_undoes`) or is refused with the list, and `dry_run` answers what would happen
without writing a line."""

from __future__ import annotations

from compaction_app.models import AuditEntry, Compaction
from sessions_app.models import RolloutLine


def _three(make_session, add_turn, compact):
    session = make_session()
    compactions = []
    for n in range(3):
        add_turn(session, n + 1)
        compactions.append(compact(session))
    return session, compactions


def _url(compaction) -> str:
    return f"/api/v1/compactions/{compaction.pk}/rollback"


def test_a_rollback_without_a_reason_is_refused_with_400_and_writes_nothing(make_session, add_turn, compact,
                                                                            support_api):
    session, (first, *_rest) = _three(make_session, add_turn, compact)
    lines = RolloutLine.objects.filter(session=session).count()
    for body in ({}, {"reason": ""}, {"reason": "   "}):
        response = support_api.post(_url(first), body, format="json")
        assert response.status_code == 400, body
        assert response.json()["error"]["code"] == "invalid" and "reason" in response.json()["error"]["message"]
    assert RolloutLine.objects.filter(session=session).count() == lines
    assert not Compaction.objects.filter(rolled_back=True).exists()


def test_undoing_later_compactions_needs_them_named_or_is_refused_with_the_list(make_session, add_turn, compact,
                                                                               support_api):
    session, (first, second, third) = _three(make_session, add_turn, compact)
    lines = RolloutLine.objects.filter(session=session).count()

    for named in (None, [second.pk], [second.pk, third.pk, 999]):
        body = {"reason": "bad summary"} | ({"expect_undoes": named} if named is not None else {})
        refused = support_api.post(_url(first), body, format="json")
        assert refused.status_code == 409, named
        error = refused.json()["error"]
        assert error["code"] == "undoes_not_confirmed"
        assert [c["id"] for c in error["undoes"]] == [second.pk, third.pk]
        assert f"#{second.pk}, #{third.pk}" in error["message"]
    assert RolloutLine.objects.filter(session=session).count() == lines
    assert not AuditEntry.objects.filter(action="rollback").exists()

    # The newest compaction undoes nothing else: it needs no list.
    assert support_api.post(_url(third), {"reason": "the last one"}, format="json").status_code == 200
    done = support_api.post(_url(first), {"reason": "bad summary", "expect_undoes": [second.pk]}, format="json")
    assert done.status_code == 200 and [c["id"] for c in done.json()["undoes"]] == [second.pk]


def test_a_dry_run_answers_what_the_rollback_would_do_and_writes_nothing(make_session, add_turn, compact,
                                                                         support_api):
    session, (first, second, third) = _three(make_session, add_turn, compact)
    lines = RolloutLine.objects.filter(session=session).count()

    would = support_api.post(_url(first), {"reason": "checking", "dry_run": True,
                                           "expect_undoes": [second.pk, third.pk]}, format="json")
    assert would.status_code == 200
    body = would.json()
    assert body["dry_run"] is True and body["compaction"] == first.pk and body["rolled_back"] is False
    assert [c["id"] for c in body["undoes"]] == [second.pk, third.pk]
    assert body["items_before"] > 0
    # the refusal a real one would meet, without the list
    refused = support_api.post(_url(first), {"reason": "checking", "dry_run": True}, format="json")
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "undoes_not_confirmed"
    assert support_api.post(_url(first), {"dry_run": True}, format="json").status_code == 400

    assert RolloutLine.objects.filter(session=session).count() == lines
    assert not Compaction.objects.filter(rolled_back=True).exists()
    assert not AuditEntry.objects.filter(action="rollback").exists()


def test_the_schema_documents_the_reason_the_confirmation_and_the_dry_run(support_api):
    schema = support_api.get("/api/v1/openapi.json").json()
    request = schema["components"]["schemas"]["RollbackRequest"]
    assert set(request["required"]) == {"reason"}
    assert {"reason", "expect_undoes", "dry_run"} <= set(request["properties"])
    answers = schema["paths"]["/api/v1/compactions/{id}/rollback"]["post"]["responses"]["200"]
    assert answers["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/RollbackAnswer"}
    refs = str(schema["components"]["schemas"]["RollbackAnswer"])
    assert "RollbackResult" in refs and "RollbackDryRun" in refs


def test_the_rollback_page_confirms_the_later_compactions_it_showed_and_refuses_one_that_landed_since(
    make_session, add_turn, compact, client, support_user
):
    session = make_session()
    add_turn(session, 1)
    first = compact(session)
    add_turn(session, 2)
    second = compact(session)
    client.force_login(support_user)
    form = client.get(f"/compactions/{first.pk}/rollback/").content.decode()
    assert f'<input type="hidden" name="expect_undoes" value="{second.pk}">' in form

    add_turn(session, 3)
    third = compact(session)  # lands while the form is open: the form showed only the second
    stale = client.post(f"/compactions/{first.pk}/rollback/", {"reason": "bad", "expect_undoes": [second.pk]})
    assert stale.status_code == 409 and f"#{second.pk}, #{third.pk}" in stale.content.decode()
    assert not Compaction.objects.filter(rolled_back=True).exists()
    done = client.post(f"/compactions/{first.pk}/rollback/", {"reason": "bad",
                                                               "expect_undoes": [second.pk, third.pk]})
    assert done.status_code == 302
    assert set(Compaction.objects.filter(rolled_back=True).values_list("pk", flat=True)) == {first.pk, second.pk,
                                                                                             third.pk}
