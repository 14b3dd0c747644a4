"""Alert silences are scoped and audited (issue 42): an operator silences within one session, a rule for the whole
fleet is the support role's; a silence is lifted by whoever set it or by the support role; setting and lifting are
audit entries. One definition of what a silence covers (`alerts.silence_scope`) serves both the raise and the live card.
And the alerts filters are bounded: `?session=2**63` is a 400 on the API and the page, never a 500."""

from __future__ import annotations

import pytest

from compaction_app.engine import alerts as rules
from compaction_app.models import Alert, AlertSilence, AuditEntry
from sessions_app.compactions import alerts

pytestmark = pytest.mark.django_db


def test_an_operator_may_not_silence_a_rule_for_every_session(operator_api, session):
    refused = operator_api.post("/api/v1/alerts/silences", {"kind": "storm"}, format="json")

    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "permission_denied"
    assert refused.json()["error"]["message"] == ("silencing a rule for every session needs the support role; "
                                                  "silence it in one session instead")
    assert not AlertSilence.objects.exists()
    assert operator_api.post("/api/v1/alerts/silences", {"kind": "storm", "session": session.pk},
                             format="json").status_code == 201


def test_the_support_role_silences_fleet_wide_and_both_are_audited_with_who(support_api, support_user):
    made = support_api.post("/api/v1/alerts/silences", {"kind": "storm", "minutes": 30, "reason": "deploy"},
                            format="json")
    assert made.status_code == 201
    entry = AuditEntry.objects.get(action=AuditEntry.Action.ALERT_SILENCE)
    assert entry.actor == support_user and entry.reason == "deploy"
    assert entry.detail["kind"] == "storm" and entry.detail["session"] is None and entry.detail["until"]

    assert support_api.delete(f"/api/v1/alerts/silences/{made.json()['id']}").status_code == 204
    lifted = AuditEntry.objects.get(action=AuditEntry.Action.ALERT_SILENCE_LIFT)
    assert lifted.actor == support_user and lifted.detail["set_by"] == support_user.username


def test_only_the_setter_or_the_support_role_lifts_a_silence(api_client_for, make_user, support_api, session):
    setter, other = api_client_for(make_user("operator")), api_client_for(make_user("operator"))
    silence_id = setter.post("/api/v1/alerts/silences", {"session": session.pk}, format="json").json()["id"]

    refused = other.delete(f"/api/v1/alerts/silences/{silence_id}")

    assert refused.status_code == 403 and "only they or the support role" in refused.json()["error"]["message"]
    assert AlertSilence.objects.filter(pk=silence_id).exists()
    assert not AuditEntry.objects.filter(action=AuditEntry.Action.ALERT_SILENCE_LIFT).exists()
    assert setter.delete(f"/api/v1/alerts/silences/{silence_id}").status_code == 204
    again = setter.post("/api/v1/alerts/silences", {"session": session.pk}, format="json").json()["id"]
    assert support_api.delete(f"/api/v1/alerts/silences/{again}").status_code == 204


def test_the_pages_lift_refuses_another_operators_silence(client, make_user, session):
    setter = make_user("operator")
    silence = AlertSilence.objects.create(kind="loop", session=session, created_by=setter)
    client.force_login(make_user("operator"))

    response = client.post(f"/alerts/silences/{silence.pk}/lift/", HTTP_HX_REQUEST="true")

    assert response.status_code == 403 and AlertSilence.objects.filter(pk=silence.pk).exists()


@pytest.mark.parametrize(("silence", "kind", "session", "covered"), [
    (("storm", None), "storm", 7, True), (("storm", None), "storm", None, True), (("storm", None), "loop", 7, False),
    (("", 7), "loop", 7, True), (("", 7), "loop", 8, False), (("", 7), "fleet_storm", None, False),
    (("loop", 7), "loop", 7, True), (("loop", 7), "storm", 7, False), (("loop", 7), "loop", None, False),
])
def test_what_a_silence_covers_is_the_same_for_the_raise_and_the_live_card(make_session, silence, kind, session,
                                                                          covered):
    sessions = {7: make_session(title="seven"), 8: make_session(title="eight")}
    silenced_kind, silenced_session = silence
    AlertSilence.objects.create(kind=silenced_kind,
                                session=sessions[silenced_session] if silenced_session else None)
    owner = sessions[session].pk if session else None
    alert = Alert.objects.create(kind=kind, session_id=owner, message="m")

    assert alerts.is_silenced(kind=kind, session_id=owner) is covered
    assert (alert not in alerts.recent_alerts(limit=10)) is covered


def test_the_live_card_still_shows_its_limit_of_alerts_past_silenced_ones(make_session):
    quiet, loud = make_session(title="quiet"), make_session(title="loud")
    AlertSilence.objects.create(kind="", session=quiet)
    for n in range(5):
        Alert.objects.create(kind=rules.AlertKind.LOOP.value, session=loud, message=f"loud {n}")
        Alert.objects.create(kind=rules.AlertKind.LOOP.value, session=quiet, message=f"quiet {n}")

    shown = alerts.recent_alerts(limit=4)

    assert [a.message for a in shown] == ["loud 4", "loud 3", "loud 2", "loud 1"]


@pytest.mark.parametrize("value", [str(2**63), str(-(2**63) - 1), "99999999999999999999999"])
def test_an_alerts_session_filter_past_64_bits_is_a_400_on_the_api_and_the_page(operator_api, client,
                                                                                 operator_user, value):
    api = operator_api.get(f"/api/v1/alerts?session={value}")
    assert api.status_code == 400 and api.json()["error"]["code"] == "invalid"
    client.force_login(operator_user)
    assert client.get(f"/alerts/?session={value}").status_code == 400
    silence = operator_api.post("/api/v1/alerts/silences", {"session": value}, format="json")
    assert silence.status_code == 400


@pytest.mark.parametrize("path", ["/api/v1/analytics?policy={}", "/api/v1/analytics?provider={}",
                                  "/api/v1/archives?before={}"])
def test_every_id_filter_past_64_bits_is_a_400(support_api, admin_api, path):
    api = admin_api if "archives" in path else support_api
    assert api.get(path.format(2**63)).status_code == 400
