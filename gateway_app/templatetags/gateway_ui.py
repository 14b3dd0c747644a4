"""The gateway card of a gateway session's page (issue 29): its state, the operator's actions and the last thing the
gateway did for an operator."""

from __future__ import annotations

from django import template

from gateway_app.selectors import gateway_card

register = template.Library()


@register.inclusion_tag("gateway_app/partials/gateway_card.html", takes_context=True)
def gateway_card_for(context, session_id: int):
    return {**gateway_card(session_id=session_id), "role": context.get("role"),
            "csrf_token": context.get("csrf_token"), "request": context.get("request")}
