"""Tests for tests/scripts/test_harness.py to run in a pytest of its own (the file name keeps them out of the
suite): one of each kind the harness sorts."""

from __future__ import annotations

import pytest


def test_pure():
    assert sum([1, 2]) == 3


def test_with_db(db):
    from django.contrib.auth.models import Group

    assert Group.objects.filter(name="operator").exists()


@pytest.mark.channel_layer
def test_marked_channel_layer():
    from channels.layers import get_channel_layer

    assert get_channel_layer() is not None


def test_unmarked_channel_layer():
    from channels.layers import get_channel_layer

    assert get_channel_layer() is not None


def test_asks_for_redis(redis_url):
    assert redis_url.startswith("redis://")


def test_asks_for_postgres(postgres_url):
    assert postgres_url.startswith("postgres")
