"""The gateway's lookup thread keeps its database connection from one read to the next, and closes it on demand."""

from __future__ import annotations

import pytest
from django.db import DatabaseError, connection

from gateway_app import lookups


def _mark_connection() -> None:
    with connection.cursor() as cursor:  # a temporary table lives as long as its connection
        cursor.execute("CREATE TEMPORARY TABLE gateway_lookup_probe (x integer)")


def _same_connection() -> bool:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT COUNT(*) FROM gateway_lookup_probe")
        return True
    except DatabaseError:
        return False


def _is_open() -> bool:
    return connection.connection is not None


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_a_lookup_reuses_the_connection_the_one_before_opened_until_closed_on_demand():
    await lookups.run(_mark_connection)
    assert await lookups.run(_same_connection)
    lookups.close_connections()
    assert not await lookups.run(_is_open)
