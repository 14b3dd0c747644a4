"""The plain rules of alert delivery (issue 45): which change is worth a message, the back-off, the signature and
what a Slack-compatible receiver is shown."""

from __future__ import annotations

import hashlib
import hmac

from compaction_app.engine import alert_delivery as m
from compaction_app.engine.alerts import AlertKind


def test_a_cause_is_told_when_raised_at_each_doubling_of_its_count_and_when_acknowledged():
    told = {count: m.event_for(count=count, acknowledged=False) for count in range(1, 18)}
    assert [c for c, e in told.items() if e is m.DeliveryEvent.UPDATED] == [2, 4, 8, 16]
    assert told[1] is m.DeliveryEvent.RAISED
    assert m.event_for(count=7, acknowledged=True) is m.DeliveryEvent.ACKNOWLEDGED


def test_the_back_off_doubles_from_its_base_and_stops_at_its_cap():
    assert [m.backoff_seconds(a, base=30, cap=300) for a in range(1, 7)] == [30, 60, 120, 240, 300, 300]


def test_every_alert_kind_has_a_severity():
    assert set(m.KIND_SEVERITY) == set(AlertKind)
    assert m.severity_of("a rule added later") is m.Severity.WARNING


def test_the_signature_is_an_hmac_of_the_timestamp_and_the_exact_body():
    body = m.body_bytes({"b": 1, "a": [1, 2]})
    assert body == b'{"a":[1,2],"b":1}'
    expected = hmac.new(b"k", b"1700000000." + body, hashlib.sha256).hexdigest()
    assert m.signature(b"k", timestamp="1700000000", body=body) == f"sha256={expected}"
    assert m.signature(b"k", timestamp="1700000001", body=body) != f"sha256={expected}"


def test_text_from_a_transcript_cannot_become_a_slack_link_or_mention():
    facts = m.AlertFacts(id=1, kind="loop", severity="critical", message="<!channel> see <http://evil|here> & go",
                         session_id=3, count=1, created_at=None, last_at=None, url="https://cw.example/sessions/3/")
    text = m.slack_payload(m.DeliveryEvent.RAISED, facts)["text"]
    assert "<!channel>" not in text and "<http://evil|here>" not in text
    assert "&lt;!channel&gt; see &lt;http://evil|here&gt; &amp; go" in text
    assert text.endswith("<https://cw.example/sessions/3/|Open in compactweb>")
