"""The findings' predicted savings (docs/advice.md, "Savings") on real traces: the first findings' savings
against an independent recomputation from the raw events (tests/reference.py reads them with plain json) and,
where the remedy is a what-if, from `opscope critical-path --what-if`; on every corpus trace the savings add up
to at most the window; scaling every duration by k scales every saving by k; removing a finding's evidence
events removes the finding."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

import opscope
import reference as ref
from conftest import corpus_path
from opscope.analysis.base import intervals
from opscope.analysis.findings import OUTCOMES, Advice, RuleConfig, severity
from opscope.analysis.overview import AnalyzeOptions
from opscope.analysis.rules.advise import advise
from opscope.analysis.rules.savings import window_claims
from test_categories import corpus_traces

RESNET_V100 = "kineto/tb_plugin_samples_resnet50_num_workers_0_worker0.1623143089861.pt.trace.json.gz"
V100_NS = "hta/ns_resolution_trace_rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
DLRM = "param/dlrm_kineto/worker0_step_12.1694128201545.pt.trace.json"
COMPARE_BASE = "hta/trace_compare_base_base.json.gz"
BACKWARD = "hta/call_stack_backward_thread.json"
MTIA = "hta/mtia_inference_trace_mtia_inference_rank_0.json.gz"
LOADER = re.compile(r"DataLoader.*__next__|DataLoaderIter.*__next__")


@cache
def advice_of(rel: str) -> Advice:
    result = advise(opscope.load(corpus_path(rel)))
    assert result.advice is not None
    return result.advice


@cache
def raw(rel: str) -> list[dict]:
    return ref.load(corpus_path(rel))


def gpu_busy(events: list[dict]) -> list[tuple[int, int]]:
    return ref.merge([(g.start, g.end) for g in ref.gpu(events)])


def steady(events: list[dict]) -> list[tuple[int, int]]:
    """The steady part of the window (docs/advice.md, "Capture type"), from raw events: the step windows (a
    first step 3x the median of the others left out), else the GPU's first to last work."""
    steps = ref.steps(events)
    if steps:
        rest = sorted(b - a for a, b in steps[1:])
        if len(steps) >= 3 and steps[0][1] - steps[0][0] >= 3 * rest[len(rest) // 2]:
            steps = steps[1:]
        return ref.merge(steps)
    busy = gpu_busy(events)
    return [(busy[0][0], busy[-1][1])]


def idle_gaps(events: list[dict]) -> list[tuple[int, int]]:
    """The GPU's idle gaps inside the steady part, from raw events."""
    out = []
    busy = gpu_busy(events)
    for lo, hi in steady(events):
        inside = ref.intersect(busy, [(lo, hi)])
        edges = [lo, *(x for pair in inside for x in pair), hi]
        out += [(a, b) for a, b in zip(edges[::2], edges[1::2], strict=True) if b > a]
    return out


def overlapping(gaps: list[tuple[int, int]], calls: list[tuple[int, int]]) -> list[tuple[int, int]]:
    return [(a, b) for a, b in gaps if any(s < b and e > a for s, e in calls)]


def by_id(advice: Advice, rule: str):  # type: ignore[no-untyped-def]
    (found,) = [f for f in advice.findings if f.id == rule]
    return found


def saving_us(advice: Advice, rule: str) -> float:
    return (by_id(advice, rule).predicted_saving_ns or 0) / 1e3


# --- five traces: the first findings' savings, recomputed ----------------------------------------------------


def what_if_us(cli, rel: str, *changes: tuple[str, float]) -> float:  # type: ignore[no-untyped-def]
    """`opscope critical-path --what-if` of these changes at once, summed over the steps (µs)."""
    flags = [arg for selector, factor in changes for arg in ("--what-if", f"{selector}:{factor}")]
    out = cli("critical-path", corpus_path(rel), *flags, "--format", "json")
    assert out.code == 0, out.err
    return float(sum(s["what_if"]["saving_us"] for s in json.loads(out.out)["steps"]))


@pytest.mark.corpus
def test_dataloader_saving_is_the_what_if(cli) -> None:
    """ResNet-50, no DataLoader workers (issue 59's "done when"): the first finding is the DataLoader wait, and
    its saving is the critical path's what-if with the loads removed (summed over the steps): the change the
    finding states, and within 5% of `--what-if 'DataLoader:0'`. The loads (raw events) hold more time than
    that: the GPU still has the previous step's work to finish when a load ends."""
    advice = advice_of(RESNET_V100)
    first = advice.findings[0]
    assert first.id == "dataloader_bound" and first.saving_basis == "critical_path_what_if"
    assert first.what_if is not None and first.what_if[1] == 0.0
    events = raw(RESNET_V100)
    steps = ref.steps(events)
    loads = [
        ref.span(e)
        for e in events
        if ref.is_x(e) and LOADER.search(e.get("name", "")) and ref.in_steps(ref.span(e)[0], steps)
    ]
    stake = sum(b - a for a, b in loads) / 1e3
    assert first.time_at_stake_ns / 1e3 == pytest.approx(stake, abs=1e-3)
    assert saving_us(advice, "dataloader_bound") == pytest.approx(
        what_if_us(cli, RESNET_V100, first.what_if), abs=1e-3
    )
    assert saving_us(advice, "dataloader_bound") == pytest.approx(
        what_if_us(cli, RESNET_V100, ("DataLoader", 0)), rel=0.05
    )
    assert saving_us(advice, "dataloader_bound") < stake


@pytest.mark.corpus
def test_tensor_core_saving_is_the_what_if_of_half_the_fp32_kernels(cli) -> None:
    """V100 ResNet (fp32, GPU-bound): the first finding is fp32 GEMMs / convolutions; with tensor cores they
    would take half the time (factor 0.5, docs/advice.md): its change is every fp32 GEMM / conv kernel x 0.5
    and its saving that change's what-if, which on a GPU-bound step is close to half its time at stake (never
    more); each kernel in the evidence carries its raw total time."""
    advice = advice_of(V100_NS)
    first = advice.findings[0]
    assert first.id == "tensor_cores_unused" and first.shared_with == ()
    assert first.what_if is not None and first.what_if[1] == 0.5
    assert (first.predicted_saving_ns or 0) / 1e3 == pytest.approx(
        what_if_us(cli, V100_NS, first.what_if), abs=1e-3
    )
    assert first.predicted_saving_ns <= first.time_at_stake_ns / 2 + 1
    assert first.predicted_saving_ns == pytest.approx(first.time_at_stake_ns / 2, rel=0.01)
    totals: dict[str, int] = {}
    for g in ref.gpu(raw(V100_NS)):
        if g.kind == "kernel":
            totals[g.name] = totals.get(g.name, 0) + g.end - g.start
    for item in first.evidence:
        assert item["time_us"] == pytest.approx(totals[item["kernel"]] / 1e3, abs=1e-3)
    assert sum(totals[e["kernel"]] for e in first.evidence) <= first.time_at_stake_ns


@pytest.mark.corpus
def test_exposed_communication_on_a_host_bound_step_saves_nothing(cli) -> None:
    """DLRM rank 0: 38% of the window is communication not overlapped with compute (raw: the NCCL kernels'
    union minus its intersection with the other kernels'), but the step's critical path is the host's (82%
    CPU): overlapping the communication would not shorten it. The rule measures the exposed time and says
    that its fix saves nothing on the critical path; the first finding is the host's."""
    advice = advice_of(DLRM)
    kernels = [g for g in ref.gpu(raw(DLRM)) if g.kind == "kernel"]
    comm = [(g.start, g.end) for g in kernels if "nccl" in g.name.lower()]
    compute = [(g.start, g.end) for g in kernels if "nccl" not in g.name.lower()]
    exposed = ref.union_length(comm) - ref.union_length(ref.intersect(comm, compute))
    (outcome,) = [o for o in advice.outcomes if o.id == "exposed_communication"]
    assert outcome.status == "no saving on the critical path"
    (held,) = [f for f in advice.withheld if f.id == "exposed_communication"]
    assert held.time_at_stake_ns == exposed and held.what_if is not None
    assert "exposed" in held.title and "overlapped" in held.title
    assert what_if_us(cli, DLRM, held.what_if) < 1.0
    assert advice.findings[0].id != "exposed_communication"


@pytest.mark.corpus
@pytest.mark.parametrize("rel", [RESNET_V100, V100_NS, DLRM, COMPARE_BASE])
def test_no_saving_exceeds_the_what_if_of_its_change(cli, rel: str) -> None:
    """Each saving from the what-if is at most the what-if of its change alone, and together they are at most
    the what-if of every change at once (issue 59, "done when"); estimates are said to be estimates."""
    advice = advice_of(rel)
    changes = []
    for f in advice.findings:
        if f.saving_basis == "critical_path_what_if":
            assert f.what_if is not None and f.saving_model.endswith(", critical path")
            assert (f.predicted_saving_ns or 0) / 1e3 <= what_if_us(cli, rel, f.what_if) + 1e-3
            changes.append(f.what_if)
        else:
            assert f.saving_basis == "estimate" and not f.saving_model.endswith(", critical path")
    if changes:
        together = sum((f.predicted_saving_ns or 0) for f in advice.findings if f.what_if in changes) / 1e3
        assert together <= what_if_us(cli, rel, *changes) + 1e-3


@pytest.mark.corpus
@pytest.mark.parametrize("rel", [MTIA, BACKWARD])
def test_gap_saving_is_the_long_gaps(rel: str) -> None:
    """Idle traces: the first finding is the long idle gaps; removing them saves their length (raw: gaps of
    more than 1 ms between the merged GPU intervals inside the steady part: no step markers here, so from the
    GPU's first to its last work). A host-wait finding on the same idle time keeps only what the gaps do not
    already claim."""
    advice = advice_of(rel)
    long = [b - a for a, b in idle_gaps(raw(rel)) if b - a > 1_000_000]
    assert advice.capture is not None and advice.capture.steady_ns == sum(b - a for a, b in steady(raw(rel)))
    gaps = by_id(advice, "gpu_gaps")
    if advice.findings[0].id == "gpu_gaps":
        assert gaps.predicted_saving_ns == sum(long)
    else:
        # the host's cause named first (host_bound claims before the symptom rules, issue 59): the long gaps
        # keep what it does not explain, never less than their length less its saving
        first = advice.findings[0]
        assert first.id == "host_bound" and "mostly" in first.title
        assert "host_bound" in gaps.shared_with
        assert sum(long) - (first.predicted_saving_ns or 0) <= (gaps.predicted_saving_ns or 0) <= sum(long)


# --- every corpus trace: savings add up --------------------------------------------------------------------


@pytest.mark.corpus
@pytest.mark.parametrize("rel", corpus_traces())
def test_savings_add_up_to_at_most_the_window(rel: str) -> None:
    advice = advice_of(rel)
    savings = [f.predicted_saving_ns or 0 for f in advice.findings]
    assert all(s > 0 for s in savings) and savings == sorted(savings, reverse=True)
    assert sum(savings) <= advice.window_ns
    assert advice.combined_saving_ns <= sum(savings)
    for f in advice.findings:
        assert (f.predicted_saving_ns or 0) <= f.time_at_stake_ns and f.saving_model
        assert f.saving_share == pytest.approx((f.predicted_saving_ns or 0) / advice.window_ns)
        assert f.severity == severity(f.saving_share, saving_ns=f.predicted_saving_ns)
    assert [o.id for o in advice.outcomes] == list(advice.rules_checked)
    assert all(o.status in OUTCOMES for o in advice.outcomes)
    assert all(o.reason for o in advice.outcomes if o.status == "not evaluated")
    shown = {f.id for f in advice.findings}
    assert shown == {o.id for o in advice.outcomes if o.status == "finding"}


# --- properties ------------------------------------------------------------------------------------------------


def _rewrite(src: Path, dst: Path, change) -> Path:  # type: ignore[no-untyped-def]
    doc = ref.load_doc(src)
    doc["traceEvents"] = [e for e in (change(e) for e in doc["traceEvents"]) if e is not None]
    dst.write_text(json.dumps(doc, default=float))
    return dst


@pytest.mark.corpus
def test_scaling_every_duration_scales_every_saving(tmp_path: Path) -> None:
    """The trace with every timestamp and duration x3 (the same run, three times slower): the same findings,
    each saving x3 (the one absolute threshold that matters here, the long gap, scaled with it)."""

    def slower(e: dict) -> dict:
        out = dict(e)
        for key in ("ts", "dur"):
            if isinstance(out.get(key), (int, float)):
                out[key] = out[key] * 3
        return out

    path = _rewrite(corpus_path(COMPARE_BASE), tmp_path / "slower.json", slower)
    config = RuleConfig(thresholds={"gpu_gaps": 3000.0}, min_saving_ns=150_000)
    scaled = advise(opscope.load(path, cache=False), AnalyzeOptions(rules=config)).advice
    assert scaled is not None
    base = advice_of(COMPARE_BASE)
    assert [f.id for f in scaled.findings] == [f.id for f in base.findings]
    for a, b in zip(base.findings, scaled.findings, strict=True):
        assert (b.predicted_saving_ns or 0) == pytest.approx(3 * (a.predicted_saving_ns or 0), abs=30)
        assert b.severity == a.severity


@pytest.mark.corpus
def test_removing_the_evidence_removes_the_finding(tmp_path: Path) -> None:
    """ResNet-50 without its DataLoader __next__ events: no dataloader_bound finding, and the idle time it
    claimed falls to the idle rules (the same window, so the savings still add up)."""
    path = _rewrite(
        corpus_path(RESNET_V100),
        tmp_path / "no_loader.json",
        lambda e: None if LOADER.search(str(e.get("name", ""))) else e,
    )
    advice = advise(opscope.load(path, cache=False)).advice
    assert advice is not None
    assert "dataloader_bound" not in {f.id for f in (*advice.findings, *advice.withheld)}
    assert "dataloader_bound" in {f.id for f in advice_of(RESNET_V100).findings}
    assert sum(f.predicted_saving_ns or 0 for f in advice.findings) <= advice.window_ns


@pytest.mark.corpus
def test_a_rule_that_saves_nothing_is_not_a_finding(cli) -> None:
    """MI250 mini-toy: the GPU is under 50% busy (host_bound's metric crosses its threshold), but its idle time
    is not mostly host wait, so there is no host-wait time to save: not a finding, never "info host_bound ...
    (0.000 ms)"; the JSON lists it with its value as "no time at stake"."""
    rel = "hta/amd_trace_mi250_minitoy_train_ROCm6_2_kineto.json.gz"
    data = json.loads(cli("advise", corpus_path(rel), "--format", "json").out)
    assert "host_bound" not in {f["id"] for f in data["findings"]}
    (outcome,) = [o for o in data["rules_evaluated"] if o["id"] == "host_bound"]
    assert outcome["status"] == "no time at stake" and outcome["value"] < outcome["threshold"]
    assert "host_bound" not in cli("advise", corpus_path(rel), "--width", "200").out.split("fixing")[0]


@given(
    st.lists(st.tuples(st.integers(-50, 50), st.integers(-50, 50)), max_size=20),
    st.lists(st.tuples(st.integers(-50, 50), st.integers(0, 30)), max_size=8),
)
def test_window_claims_are_the_claims_cut_to_each_piece_and_merged(
    claims: list[tuple[int, int]], pieces: list[tuple[int, int]]
) -> None:
    """The intersection with the window's pieces equals cutting the claims to every piece and merging."""
    frame = pl.DataFrame(
        {"start_ns": [a for a, _ in claims], "end_ns": [b for _, b in claims]},
        schema={"start_ns": pl.Int64, "end_ns": pl.Int64},
    )
    bounds = [(lo, lo + n) for lo, n in pieces]
    got = window_claims(frame, bounds)
    cut = [intervals.clip(frame, lo, hi) for lo, hi in bounds]
    want = intervals.merge(pl.concat(cut)) if cut else got.clear()
    assert list(got.iter_rows()) == list(want.iter_rows())


@given(st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=8))
def test_a_change_states_its_names_exactly(names: list[str]) -> None:
    """The JSON's `what_if.names` are read back from the selector a rule builds: every name, nothing else."""
    from opscope.analysis.base.selectors import exact_names, names_in

    selector = exact_names(names)
    assert names_in(selector) == sorted(set(names))
    assert all(re.fullmatch(selector[1:-1], n) for n in names)
