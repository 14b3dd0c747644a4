"""The styled error pages (403, 404, 500, 503): the site's navigation, a plain reason, no traceback.

Django calls these as `handler403` / `handler404` / `handler500` (compactweb.urls); `role_required` renders the 403
page itself, so a refused role is an answer, not an exception (nothing is logged with a traceback for it).

`handler500` is called inside Django's handling of the uncaught exception, so it sees it: a database that does not
answer or refuses writes (compactweb.db_outage) is a 503, "try again in a moment", not a 500. Under /api/ the
answer is JSON in the API's one error shape (compactweb.api_errors), whatever failed, never an HTML page.
"""

from __future__ import annotations

import logging
import sys

from django.contrib.auth.models import AnonymousUser
from django.contrib.messages.storage.cookie import CookieStorage
from django.http import JsonResponse
from django.shortcuts import render

from compactweb import db_outage
from compactweb.api_errors import DATABASE_UNAVAILABLE, RETRY_AFTER_SECONDS, error_body
from compactweb.roles import FORBIDDEN_TITLE, forbidden_page, role_of

logger = logging.getLogger(__name__)

TITLES = {
    403: FORBIDDEN_TITLE,
    404: "Nothing here",
    500: "Something went wrong on our side",
    503: "The database is not answering",
}
API_PREFIX = "/api/"


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
    unavailable = db_outage.is_unavailable(sys.exc_info()[1])
    if db_outage.is_conflict(sys.exc_info()[1]):
        if request.path.startswith(API_PREFIX):
            return JsonResponse(error_body(db_outage.WRITE_CONFLICT, db_outage.CONFLICT_MESSAGE), status=409,
                                headers={"Retry-After": str(RETRY_AFTER_SECONDS)})
        return error_page(request, status=409, reason=db_outage.CONFLICT_MESSAGE)
    if request.path.startswith(API_PREFIX):
        if unavailable:
            return JsonResponse(error_body(DATABASE_UNAVAILABLE, db_outage.UNAVAILABLE_MESSAGE), status=503,
                                headers={"Retry-After": str(RETRY_AFTER_SECONDS)})
        return JsonResponse(error_body("internal_error", "The server failed while answering."), status=500)
    if unavailable:
        # The page itself must not ask the database again: no user (its session is a row), messages from the
        # cookie only (the session's would be read from the database).
        request.user = AnonymousUser()
        request._messages = CookieStorage(request)
        response = error_page(request, status=503, reason=db_outage.UNAVAILABLE_MESSAGE + " Nothing you asked for "
                                                          "was half-done; try again in a moment.")
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response
    return error_page(request, status=500, reason="The server failed while answering; nothing you asked for was "
                                                 "half-done. Try again, or tell an admin what you clicked.")
