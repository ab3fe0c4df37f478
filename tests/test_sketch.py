"""The mergeable quantile sketch and the exact partial statistics built on it."""

from __future__ import annotations

import math
import random

import polars as pl
import pytest

from opscope.analysis.base.durations import Durations, durations_by_name, merge_named
from opscope.analysis.base.sketch import RELATIVE_ACCURACY, Sketch, merge_all

QUANTILES = (0.0, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 1.0)


def _exact(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[math.floor(q * (len(ordered) - 1))]


def _samples(seed: int) -> dict[str, list[float]]:
    rng = random.Random(seed)
    return {
        "lognormal": [rng.lognormvariate(8, 2) for _ in range(5000)],
        "uniform_ints": [float(rng.randint(1, 10**9)) for _ in range(3000)],
        "with_zeros": [0.0] * 300 + [float(rng.randint(1, 5000)) for _ in range(700)],
        "constant": [4096.0] * 100,
        "tiny": [1.0, 2.0, 3.0],
    }


@pytest.mark.parametrize("name", ["lognormal", "uniform_ints", "with_zeros", "constant", "tiny"])
def test_quantiles_within_relative_accuracy(name: str) -> None:
    values = _samples(1)[name]
    sketch = Sketch.of(values)
    assert sketch.count == len(values)
    for q in QUANTILES:
        exact = _exact(values, q)
        got = sketch.quantile(q)
        assert got is not None
        assert abs(got - exact) <= RELATIVE_ACCURACY * exact + 1e-9, (name, q, got, exact)
    assert sketch.quantile(0.0) == min(values)
    assert sketch.quantile(1.0) == max(values)


def test_merge_is_exact_associative_and_commutative() -> None:
    values = _samples(2)["lognormal"]
    a, b, c = Sketch.of(values[:1000]), Sketch.of(values[1000:3500]), Sketch.of(values[3500:])
    whole = Sketch.of(values)
    assert a.merge(b).merge(c) == a.merge(b.merge(c)) == c.merge(a).merge(b) == whole
    assert merge_all([c, b, a]) == whole
    assert Sketch().merge(a) == a == a.merge(Sketch())


def test_empty_and_invalid() -> None:
    assert Sketch.of([]).quantile(0.5) is None
    with pytest.raises(ValueError):
        Sketch.of([1.0, -1.0])
    with pytest.raises(ValueError):
        Sketch.of([1.0]).quantile(1.5)


def test_durations_by_name_matches_direct_sketch_and_merges_exactly() -> None:
    rng = random.Random(3)
    names = [rng.choice("abcd") for _ in range(4000)]
    durs = [rng.randint(0, 10**7) for _ in range(4000)]
    frame = pl.DataFrame({"name": names, "dur": durs})
    table = durations_by_name(frame, "name", "dur")
    for key in "abcd":
        mine = [d for n, d in zip(names, durs) if n == key]
        stats = table[key]
        assert (stats.count, stats.total_ns, stats.min_ns, stats.max_ns) == (
            len(mine),
            sum(mine),
            min(mine),
            max(mine),
        )
        assert stats.sketch == Sketch.of([float(d) for d in mine])
    halves = [durations_by_name(frame[:1500], "name", "dur"), durations_by_name(frame[1500:], "name", "dur")]
    merged = merge_named(halves)
    assert merged == table
    assert isinstance(merged["a"], Durations)
