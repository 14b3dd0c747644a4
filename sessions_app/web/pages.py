"""The session page's whole context, for the page itself and for a form that answers a refusal without JavaScript
by rendering the page again with its error in place (pins, ...): the views import this, never each other."""

from __future__ import annotations

from typing import Any

from compaction_app.engine.vocabulary import Strategy, label
from sessions_app.compactions.alerts import recent_alerts
from sessions_app.compactions.retention import pin_usage, session_pins
from sessions_app.live import render as live_render
from sessions_app.models import Session
from sessions_app.transfer import codex_sources
from sessions_app.web.operator_forms import FaultInjectionForm

STRATEGIES = (("", "policy default"), *((s.value, label(s)) for s in Strategy))


def session_page(*, session: Session, **extra: Any) -> dict[str, Any]:
    context = live_render.session_context(session=session)
    context.update(nav="fleet", strategies=STRATEGIES, pins=session_pins(session_id=session.pk),
                   pin_budget=pin_usage(session=session),
                   recent_alerts=recent_alerts(session_id=session.pk), alerts_scope="session",
                   alerts_session=session.pk,
                   fault_form=FaultInjectionForm(),
                   codex_file=codex_sources.source_summary(session=session), **extra)
    return context
