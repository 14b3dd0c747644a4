"""Transactional tests can still reset the test database, while deletes stay refused outside that reset."""

import pytest
from django.db import DatabaseError, connection, transaction

from sessions_app.models import RolloutLine


@pytest.mark.django_db(transaction=True)
def test_a_transactional_test_with_rollout_lines_can_be_torn_down(make_session, items_factory):
    session = make_session(items=[items_factory.user("x")])
    assert RolloutLine.objects.filter(session=session).count() == 2
    with pytest.raises(DatabaseError, match="append-only"):
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("DELETE FROM sessions_app_rolloutline")


@pytest.mark.django_db(transaction=True)
def test_the_next_transactional_test_starts_from_an_empty_rollout():
    assert RolloutLine.objects.count() == 0
