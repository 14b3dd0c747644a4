"""The scale-out tests run on PostgreSQL (the PostgreSQL + Redis pass of scripts/test); the SQLite pass skips them
with that reason, since SQLite serves one process only."""

from __future__ import annotations

import pytest


@pytest.fixture
def on_postgresql(postgres_url, django_db_setup):
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("scale-out tests run in the PostgreSQL pass (DATABASE_URL=postgres://...), not on SQLite")
    return connection


@pytest.fixture
def operator_user(make_user):
    """The root fixture's operator, with the role groups (re)created first: an earlier transactional test's flush
    emptied the table the migration filled, and every scale-out test is transactional."""
    from django.contrib.auth.models import Group

    from compactweb.roles import ROLES

    for name in ROLES:
        Group.objects.get_or_create(name=name)
    return make_user("operator")
