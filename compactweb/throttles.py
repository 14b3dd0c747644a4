"""DRF throttling (issue 14): each user's API calls are rate-limited (429 in the error shape, with Retry-After).

No API endpoint is open to anonymous callers: DRF refuses them (401/403) before throttles run, so there is no
anonymous rate; token guessing faces 256 random bits, and the login pages are limited by django-axes.

The rates are read from settings at every request (COMPACTWEB_THROTTLE_RATES), not frozen at import as DRF's own
classes do, so a deployment (and a test) can change them. Counts live in Django's cache: per process with the
default local-memory cache, so with N web processes a client gets up to N times the rate.
"""

from __future__ import annotations

from django.conf import settings
from rest_framework.throttling import UserRateThrottle


class _SettingsRate:
    def get_rate(self):
        return settings.COMPACTWEB_THROTTLE_RATES.get(self.scope)


class UserThrottle(_SettingsRate, UserRateThrottle):
    scope = "user"
