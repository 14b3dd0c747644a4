"""The fleet filter is parsed once and applied the same way to the page's query and the websocket's events."""

from sessions_app.fleet.filter import FleetFilter

SUMMARY = {"state": "running", "provider": 2, "policy": 3, "title": "Fix a failing test #4"}


def test_malformed_values_are_ignored():
    assert FleetFilter.from_query({"state": "bogus", "provider": "x", "policy": "-1", "q": "  "}) == FleetFilter()


def test_every_condition_must_hold():
    assert FleetFilter.from_query({"state": "running", "provider": "2", "q": "FAILING"}).matches(SUMMARY)
    assert not FleetFilter.from_query({"state": "paused"}).matches(SUMMARY)
    assert not FleetFilter.from_query({"policy": "4"}).matches(SUMMARY)
    assert not FleetFilter.from_query({"q": "refactor"}).matches(SUMMARY)


def test_the_filter_round_trips_through_its_query():
    fleet_filter = FleetFilter.from_query({"state": "idle", "policy": "7", "q": "x"})
    assert FleetFilter.from_query(fleet_filter.as_query()) == fleet_filter and fleet_filter.active
