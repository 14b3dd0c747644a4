"""Login rate limits (issue 14): django-axes counts failed logins on the login page and the admin login."""

from __future__ import annotations

from axes.backends import AxesStandaloneBackend


class LoginRateLimitBackend(AxesStandaloneBackend):
    """Axes' lockout check for every login that arrives as an HTTP request (the login page, the admin login).

    `authenticate()` without a request comes from code on the server itself (management commands, the test
    client's `login()`), which no remote caller can reach; axes would refuse it outright, so it is let through to
    the next backend unchecked."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if request is None:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)
