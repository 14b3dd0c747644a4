import random
import statistics

import pytest

from sessions_app.simulator.distributions import (
    Fixed,
    LogNormal,
    Mixture,
    Size,
    SizeDistribution,
    Uniform,
    parse_distribution,
)
from sessions_app.simulator.errors import SpecError


def test_fixed_distribution_always_returns_its_value():
    dist = parse_distribution({"kind": "fixed", "value": 5000}, "output")
    assert {dist.sample(random.Random(i)) for i in range(20)} == {Size(5000, "tokens")}


def test_uniform_samples_stay_inside_the_bounds_and_cover_them():
    dist = parse_distribution({"kind": "uniform", "low": 10, "high": 20, "unit": "bytes"}, "output")
    rng = random.Random(1)
    values = [dist.sample(rng) for _ in range(500)]
    assert all(v.unit == "bytes" and 10 <= v.amount <= 20 for v in values)
    assert {v.amount for v in values} == set(range(10, 21))


def test_lognormal_is_centred_on_its_median_and_never_exceeds_the_cap():
    rng = random.Random(2)
    sampler = LogNormal(median=1000, sigma=0.5, cap=3000)
    values = [sampler.sample(rng) for _ in range(4000)]
    assert max(values) <= 3000
    assert 900 < statistics.median(values) < 1100


def test_mostly_small_sometimes_huge_mixture_follows_its_weights():
    dist = parse_distribution(
        {"kind": "mixture", "components": [
            {"weight": 9, "kind": "uniform", "low": 100, "high": 900},
            {"weight": 1, "kind": "fixed", "value": 120_000},
        ]},
        "output",
    )
    rng = random.Random(3)
    values = [dist.sample(rng).amount for _ in range(5000)]
    huge = sum(v == 120_000 for v in values)
    assert 400 < huge < 600
    assert all(v == 120_000 or 100 <= v <= 900 for v in values)


def test_same_seed_gives_the_same_sizes():
    dist = SizeDistribution(Mixture((1.0, 1.0), (Uniform(1, 100), Fixed(7))))
    a = [dist.sample(random.Random("s")).amount for _ in range(3)]
    b = [dist.sample(random.Random("s")).amount for _ in range(3)]
    assert a == b


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"kind": "gaussian"}, "output.kind"),
        ({"kind": "fixed"}, "output.value"),
        ({"kind": "fixed", "value": -1}, "output.value"),
        ({"kind": "fixed", "value": "5k"}, "output.value"),
        ({"kind": "uniform", "low": 9, "high": 3}, "output.high"),
        ({"kind": "lognormal", "median": 10, "sigma": 0, "cap": 100}, "output.sigma"),
        ({"kind": "fixed", "value": 5, "unit": "words"}, "output.unit"),
        ({"kind": "fixed", "value": 5, "mean": 3}, "output.mean"),
        ({"kind": "mixture", "components": []}, "output.components"),
        ({"kind": "mixture", "components": [{"kind": "fixed", "value": 1}]}, "output.components[0].weight"),
        ({"kind": "mixture", "components": [{"weight": 1, "kind": "fixed", "value": 1, "unit": "bytes"}]},
         "output.components[0].unit"),
    ],
)
def test_invalid_distribution_names_the_offending_field(data, field):
    with pytest.raises(SpecError) as err:
        parse_distribution(data, "output")
    assert err.value.field == field
    assert field in str(err.value)
