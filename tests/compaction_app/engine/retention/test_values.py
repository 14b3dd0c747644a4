"""values.py: addresses and the values a text states. Written from the survivors of the retention room's mutation
samples (issue 43); each test fails with its mutant planted."""

from __future__ import annotations

from compaction_app.engine.retention.values import address_of, states_address


def test_a_host_and_port_without_a_scheme_is_an_address():
    assert address_of("db-3.internal:5432") == ("db-3.internal", "5432", ())
    assert address_of("0.0.0.0:9020") == ("", "9020", ())


def test_an_address_on_a_wildcard_host_is_stated_by_its_port_alone():
    # A wildcard host is "": "listening on 9020" states `0.0.0.0:9020`, as "port 9020" does.
    assert states_address("the api is listening on 9020", "", "9020")
    assert not states_address("the api is listening on 9021", "", "9020")
