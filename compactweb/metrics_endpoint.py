"""`GET /metrics`: the Prometheus exposition (compactweb.metrics), for a scraper holding the deployment's token.

Off (404) until `COMPACTWEB_METRICS_TOKEN` is set; then only a request whose bearer is that token gets it (401
otherwise, compared in constant time). No login: a scraper has none, and the series name no session, user or
text. docs/operations.md, "Metrics", also shows the network rule for a reverse proxy in front.
"""

from __future__ import annotations

import hmac

from django.conf import settings
from django.http import HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from compactweb import health, metrics
from compactweb.api_errors import error_body

metrics.add_state_source("dependencies", health.dependency_metrics)


def _bearer(request) -> str:
    scheme, _, token = request.headers.get("Authorization", "").strip().partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


@never_cache
@require_GET
def metrics_view(request):
    expected = settings.COMPACTWEB_METRICS_TOKEN
    if not expected:
        return JsonResponse(error_body("metrics_off", "metrics are off: set COMPACTWEB_METRICS_TOKEN "
                                       "(docs/operations.md, \"Metrics\")"), status=404)
    if not hmac.compare_digest(_bearer(request).encode(), expected.encode()):
        response = JsonResponse(error_body("not_authenticated", "send the metrics token as the bearer"), status=401)
        response["WWW-Authenticate"] = 'Bearer realm="compactweb-metrics"'
        return response
    body, content_type = metrics.scrape(request.headers.get("Accept", ""))
    return HttpResponse(body, content_type=content_type)
