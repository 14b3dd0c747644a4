"""The pages' one redirect rule: go back to `next` only when it is a URL of this site."""

from __future__ import annotations

from django.utils.http import url_has_allowed_host_and_scheme


def safe_next(request, fallback: str) -> str:
    """`next` (POST, then GET) when it points at this host (url_has_allowed_host_and_scheme), else `fallback`."""
    target = request.POST.get("next") or request.GET.get("next") or ""
    if target and url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()},
                                                  require_https=request.is_secure()):
        return target
    return fallback
