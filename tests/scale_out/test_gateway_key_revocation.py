"""A gateway key revoked in one process stops working in another within the stated bound (issue 42): a Daphne
process serves a route's key (its answer remembered), the key is revoked from this process (the database, as the
admin does), and after COMPACTWEB_GATEWAY_KEY_CACHE_SECONDS (1 s) the Daphne process refuses it with 401."""

from __future__ import annotations

import time
import urllib.error
import urllib.request

import pytest
from django.conf import settings

from gateway_app.keys import do_create_gateway_key
from gateway_app.models import GatewayKey
from tests.gateway_app.conftest import make_route
from tests.scale_out.processes import child_env, free_port, start_daphne, stop

MARGIN_SECONDS = 0.5  # the request's own time on a loaded machine, on top of the bound


def status_of(port: int, key: str) -> int:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/gateway/v1/models",
                                     headers={"Authorization": f"Bearer {key}"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


@pytest.mark.timeout(300)
@pytest.mark.django_db(transaction=True)
def test_a_revoked_key_is_refused_by_another_process_within_the_bound(on_postgresql, redis_url, tmp_path):
    route = make_route()
    key = do_create_gateway_key(route=route, client_name="leaked-laptop").key
    port = free_port()
    daphne = start_daphne(port=port, env=child_env(redis_url=redis_url, broker_url=redis_url, var_dir=tmp_path),
                          log=tmp_path / "daphne.log")
    try:
        assert status_of(port, key) != 401  # served (its upstream may not answer: the key was taken)
        GatewayKey.objects.filter(route=route).update(revoked=True)

        time.sleep(settings.COMPACTWEB_GATEWAY_KEY_CACHE_SECONDS + MARGIN_SECONDS)

        assert status_of(port, key) == 401
    finally:
        stop(daphne)
