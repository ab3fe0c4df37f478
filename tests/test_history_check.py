"""`History.check` over real traces with seeded noise (tests/history_support.py), on SQLite and PostgreSQL: noise
alone never regresses, a step change of one kernel is found at the second slow run and named, a single spike is
not a regression, improvements are reported; and the policies as pure functions (hand computed)."""

from __future__ import annotations

import pytest

from history_support import TARGET, db, perturbed  # noqa: F401  (db is a fixture)
from opscope.history.api import History
from opscope.history.policy import CheckOptions, judge

pytestmark = pytest.mark.corpus

BASELINE = 10


def add_runs(history: History, seeds, factor: float = 1.0) -> list[int]:
    return [
        history.add(perturbed(seed, factor=factor), {"commit": f"c{seed:03d}"}, git=False).run_id
        for seed in seeds
    ]


def kernel_keys(found) -> set[str]:
    return {f.key for f in found if f.scope == "kernel"}


@pytest.mark.parametrize("policy", ["threshold", "zscore"])
def test_step_change_found_at_second_slow_run_and_named(db, policy) -> None:  # noqa: F811
    options = CheckOptions(policy=policy)
    with History(db) as history:
        add_runs(history, range(BASELINE))
        assert history.check(options).status == "ok"
        add_runs(history, [100], factor=1.5)
        first = history.check(options)
        assert first.status == "ok" and not first.regressions  # one slow run is not enough
        slow = add_runs(history, [101], factor=1.5)
        second = history.check(options)
    assert second.status == "regression"
    assert kernel_keys(second.regressions) == {TARGET}
    (found,) = [f for f in second.regressions if f.scope == "kernel"]
    assert (
        found.metric == "per_step_us"
        and len(found.values) == 2
        and found.ratio == pytest.approx(1.5, rel=0.05)
    )
    assert [r.id for r in second.recent_runs][-1] == slow[0] and len(second.baseline_runs) == BASELINE
    if policy == "threshold":  # the whole trace's GPU time grew 5%: under the 10% threshold (zscore sees it)
        assert not any(
            f.scope == "global" and f.metric == "gpu_time_per_step_mean_us" for f in second.regressions
        )


def test_single_spike_is_not_a_regression(db) -> None:  # noqa: F811
    with History(db) as history:
        add_runs(history, range(BASELINE))
        add_runs(history, [200], factor=3.0)
        assert history.check().status == "ok"
        add_runs(history, [201])
        result = history.check()
    assert result.status == "ok" and not result.regressions


def test_improvement_is_reported_and_not_a_failure(db) -> None:  # noqa: F811
    with History(db) as history:
        add_runs(history, range(BASELINE))
        add_runs(history, [300, 301], factor=0.5)
        result = history.check()
    assert result.status == "ok" and not result.regressions
    assert TARGET in kernel_keys(result.improvements)
    (found,) = [f for f in result.improvements if f.scope == "kernel"]
    assert found.ratio == pytest.approx(0.5, rel=0.05)


@pytest.mark.parametrize("start", [0, 1000, 2000])
def test_noise_alone_gives_no_false_regression(db, start) -> None:  # noqa: F811
    """3% log-normal noise on every GPU event, 12 runs per series, both policies."""
    with History(db) as history:
        add_runs(history, range(start, start + BASELINE + 2))
        for policy in ("threshold", "zscore"):
            result = history.check(CheckOptions(policy=policy))
            assert result.status == "ok", (policy, [(f.scope, f.key, f.ratio) for f in result.regressions])


def test_insufficient_data(db) -> None:  # noqa: F811
    with History(db) as history:
        add_runs(history, range(4))
        result = history.check()
    assert result.status == "insufficient_data" and "need 2 recent and at least 3 baseline" in (
        result.reason or ""
    )


def test_match_tags_compare_only_like_runs(db) -> None:  # noqa: F811
    with History(db) as history:
        for seed in range(BASELINE):
            history.add(perturbed(seed), {"gpu_kind": "a"}, git=False)
        for seed in (400, 401):  # slow runs on another machine: not compared with the first ones
            history.add(perturbed(seed, factor=1.5), {"gpu_kind": "b"}, git=False)
        assert history.check(CheckOptions(match_tags=("gpu_kind",))).status == "insufficient_data"
        assert history.check().status == "regression"


# ---- the policies, by hand ---------------------------------------------------------------------------------------


def test_threshold_rule_by_hand() -> None:
    opts = CheckOptions(threshold=1.10)
    base = [100.0, 101.0, 99.0, 100.0]  # median 100
    assert judge("total_us", base, [111.0, 112.0], opts) == "regression"
    assert judge("total_us", base, [111.0, 109.0], opts) is None  # one not worse than 110
    assert judge("total_us", base, [200.0, 100.0], opts) is None  # a spike
    assert judge("total_us", base, [90.0, 80.0], opts) == "improvement"  # both under 100 / 1.1
    assert judge("utilization", [0.5, 0.5, 0.5], [0.4, 0.44], opts) == "regression"  # lower is worse
    assert judge("utilization", [0.5, 0.5, 0.5], [0.6, 0.56], opts) == "improvement"
    assert judge("total_us", [100.0, 100.0], [500.0, 500.0], opts) is None  # too small a baseline


def test_zscore_rule_by_hand() -> None:
    opts = CheckOptions(policy="zscore", z=3.0)
    base = [98.0, 100.0, 102.0]  # mean 100, sample stdev 2
    assert judge("total_us", base, [106.5, 107.0], opts) == "regression"  # z 3.25, 3.5
    assert judge("total_us", base, [106.5, 105.0], opts) is None  # z 2.5
    assert judge("total_us", base, [93.0, 92.0], opts) == "improvement"
    # A flat baseline: the spread is taken as 0.5% of the mean, so +1% is z = 2, not infinity.
    assert judge("total_us", [100.0, 100.0, 100.0], [101.0, 101.0], opts) is None
    assert judge("total_us", [100.0, 100.0, 100.0], [102.0, 102.0], opts) == "regression"  # z = 4


def test_noise_alone_over_many_seeds_and_windows() -> None:
    """60 seeded noisy copies of the real trace, every window of 10 baseline + 2 recent runs, every judged figure
    (kernels, ops and categories above 1% of GPU time, the run-wide figures), both policies: never a regression."""
    from opscope.history.metrics import extract
    from opscope.history.policy import CHECKED

    runs = []
    for seed in range(5000, 5060):
        values = {(s, k, m): v for s, k, m, v in extract(perturbed(seed)).rows}
        runs.append(values)
    judged = [
        key
        for key in runs[0]
        if key[0] in CHECKED  # the advice's rows (scopes finding, realised) are recorded, not judged
        and key[2] in CHECKED[key[0]]
        and key[0] != "step"
        and (key[0] == "global" or runs[0].get((key[0], key[1], "share"), 0.0) >= 0.01)
    ]
    assert len(judged) > 20
    checks = 0
    for end in range(BASELINE + 2, len(runs) + 1):
        window = runs[end - BASELINE - 2 : end]
        for key in judged:
            series = [r.get(key, 0.0) for r in window]
            for policy in ("threshold", "zscore"):
                verdict = judge(key[2], series[:BASELINE], series[BASELINE:], CheckOptions(policy=policy))
                assert verdict != "regression", (policy, key, series)
                checks += 1
    assert checks > 3000  # 49 windows x 32 figures x 2 policies
