"""The styled error pages (403, 404, 500): the site's navigation, a plain reason, no traceback.

Django calls these as `handler403` / `handler404` / `handler500` (compactweb.urls); `role_required` renders the 403
page itself, so a refused role is an answer, not an exception (nothing is logged with a traceback for it).
"""

from __future__ import annotations

import logging

from django.shortcuts import render

from compactweb.roles import FORBIDDEN_TITLE, forbidden_page, role_of

logger = logging.getLogger(__name__)

TITLES = {
    403: FORBIDDEN_TITLE,
    404: "Nothing here",
    500: "Something went wrong on our side",
}


def error_page(request, *, status: int, reason: str):
    """The error page for `status`, saying `reason`; the navigation shows what the user's role may open."""
    try:
        role = role_of(request.user) if hasattr(request, "user") else None
    except Exception:  # a 500 may come from a database that does not answer: show the page without the nav
        logger.warning("no role for the error page", exc_info=True)
        role = None
    context = {"status": status, "title": TITLES[status], "reason": reason, "role": role, "nav": ""}
    return render(request, "error.html", context, status=status)


def permission_denied(request, exception=None):
    reason = str(exception) if exception and str(exception) else "Your role does not include this page."
    return forbidden_page(request, reason=reason)


def page_not_found(request, exception=None):
    return error_page(request, status=404, reason="There is no page at this address, or what it showed is gone.")


def server_error(request):
    return error_page(request, status=500, reason="The server failed while answering; nothing you asked for was "
                                                 "half-done. Try again, or tell an admin what you clicked.")
