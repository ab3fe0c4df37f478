"""One figure, one value, in every view (issue 28): for every trace of the corpus, the figures that several
commands print are equal across `summary`, `analyze`, `steps`, `ops`, `tree`, `efficiency`, `memory`,
`critical-path`, `ranks`, `diff`, the report's JSON payload (`opscope report T --format json`) and the notebook API, within the
rounding of their JSON (µs to 3 decimals). Each group below is one figure defined once in docs/; the test lists
every view that disagrees, by name. The last tests show the check is not vacuous: a deliberate drift in one
view makes it fail.

The commands run in-process on the real traces (the CLI's JSON, as a user would read it); the notebook API is
called on the loaded trace."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import opscope
from conftest import TRACES, CliResult
from opscope.errors import OpscopeError

US = 1e-3  # one unit of the JSON's rounding (µs to 3 decimals)
PATH_SPAN = 1e-3  # the critical path equals its span within 0.1% (docs/critical-path.md)


def corpus_traces() -> list[str]:
    """Every file of the corpus that opscope reads as a trace (by content, as `load` decides)."""
    if not TRACES.is_dir():
        return []
    from opscope.ingest.registry import detect

    found = []
    for path in sorted(TRACES.rglob("*")):
        if not path.is_file() or path.name == "MANIFEST.md":
            continue
        try:
            detect(path, str(path))
        except OpscopeError:
            continue  # not a trace (reference CSVs, an execution trace, an Nsight Compute export, ...)
        found.append(str(path.relative_to(TRACES)))
    return found


@dataclass
class Figure:
    """One figure as each view prints it: {view: value}; they must agree within `tolerance` (absolute) plus
    `relative` x the largest value."""

    name: str
    values: dict[str, float] = field(default_factory=dict)
    tolerance: float = US
    relative: float = 0.0

    def add(self, view: str, value: float | None) -> None:
        if value is not None:
            self.values[view] = float(value)

    def problem(self) -> str | None:
        if len(self.values) < 2:
            return None
        low, high = min(self.values.values()), max(self.values.values())
        allowed = self.tolerance + self.relative * max(abs(low), abs(high))
        if high - low <= allowed:
            return None
        shown = ", ".join(f"{view} {value:,.3f}" for view, value in self.values.items())
        return f"{self.name}: {shown}"


Runner = Callable[..., CliResult]


def _json(cli: Runner, *argv: object) -> dict[str, Any]:
    result = cli(*argv, "--format", "json")
    assert result.code == 0, f"{' '.join(map(str, argv))}: {result.err}"
    return json.loads(result.out)


def views(cli: Runner, path: Path) -> dict[str, Any]:
    """What every view says about `path`: each command's JSON and the notebook API's results."""
    out: dict[str, Any] = {}
    for command in ("summary", "analyze", "steps", "ops", "tree", "efficiency", "memory", "report"):
        out[command] = _json(cli, command, path)
    out["critical-path"] = _json(cli, "critical-path", path, "--top", "1")
    out["ranks"] = _json(cli, "ranks", path)
    out["diff"] = _json(cli, "diff", path, path)
    numbers = [s["step"] for s in out["steps"]["steps"] if s["step"] is not None]
    if out["steps"]["from_markers"] and numbers:  # analyze over the same windows as steps
        out["analyze --steps"] = _json(cli, "analyze", path, "--steps", ",".join(map(str, sorted(numbers))))
    trace = opscope.load(path)
    out["api"] = {
        "summary": opscope.summary(trace, top=0),
        "ops": opscope.ops(trace, top=0),
        "steps": opscope.steps(trace),
        "efficiency": opscope.efficiency(trace),
        "analyze": opscope.analyze(trace),
    }
    return out


def _per_device(rows: list[dict[str, Any]], key: str, value: str) -> dict[Any, float]:
    return {r[key]: r[value] for r in rows}


def _step_sums(steps: dict[str, Any], field_name: str) -> dict[Any, float]:
    """{device: the figure summed over the steps} of `opscope steps`' JSON."""
    out: dict[Any, float] = {}
    for s in steps["steps"]:
        for d in s["devices"]:
            if d["device"] is not None:
                out[d["device"]] = out.get(d["device"], 0.0) + d[field_name]
    return out


def figures(v: dict[str, Any]) -> Iterator[Figure]:
    """Every shared figure of one trace, view by view (see the module doc); definitions in docs/."""
    api = v["api"]
    analyze, report, steps = v["analyze"], v["report"], v["steps"]
    rows = len(steps["steps"])

    # GPU time: the summed durations of every kernel, memcpy and memset (docs/analysis-timeline.md).
    gpu = Figure("GPU time (us)", tolerance=2 * US)
    gpu.add("summary", v["summary"]["totals"]["gpu_time_us"])
    gpu.add("ops", v["ops"]["totals"]["gpu_time_us"])
    gpu.add("steps", steps["gpu_time_us"])
    gpu.add("tree", v["tree"]["gpu_time_us"])
    gpu.add("efficiency", v["efficiency"]["totals"]["gpu_time_us"])
    gpu.add("analyze categories", sum(c["total_us"] for c in analyze["categories"]))
    gpu.add("report headline", report["headline"]["gpu_time_us"])
    gpu.add("report kernels", report["kernels"]["totals"]["gpu_time_us"])
    gpu.add("report efficiency", report["efficiency"]["gpu_time_us"])
    gpu.add("report flame", report["flame"]["total_ns"] / 1e3 if report["flame"] else None)
    gpu.add("api summary", api["summary"].gpu_time_ns / 1e3)
    gpu.add("api ops", api["ops"].gpu_time_ns / 1e3)
    gpu.add("api steps", api["steps"].gpu_time_ns / 1e3)
    gpu.add("api efficiency", api["efficiency"].gpu_time_ns / 1e3)
    yield gpu

    # Efficiency totals: sized + unsized = GPU time (docs/efficiency.md).
    eff = v["efficiency"]["totals"]
    split = Figure("efficiency: sized + unsized = GPU time (us)", tolerance=2 * US)
    split.add("efficiency GPU time", eff["gpu_time_us"])
    split.add("efficiency sized + unsized", eff["sized_gpu_time_us"] + eff["unsized_gpu_time_us"])
    split.add(
        "report sized + unsized",
        report["efficiency"]["sized_gpu_time_us"] + report["efficiency"]["unsized_gpu_time_us"],
    )
    yield split
    sized = Figure("efficiency: sized GPU time (us)")
    sized.add("efficiency", eff["sized_gpu_time_us"])
    sized.add("report", report["efficiency"]["sized_gpu_time_us"])
    sized.add("api", api["efficiency"].sized_gpu_time_ns / 1e3)
    yield sized

    # Window, busy, idle, communication per device over the whole trace (docs/analysis-timeline.md).
    window = Figure("analysed window (us)")
    window.add("analyze", analyze["window_us"])
    window.add("report headline", report["headline"]["window_us"])
    window.add("api analyze", api["analyze"].timeline.window_ns / 1e3)
    if not steps["from_markers"] and rows == 1:  # one whole-trace window: the same window
        window.add("steps (whole trace)", steps["steps"][0]["wall_us"])
    yield window
    api_busy = {d.device: d.busy_ns / 1e3 for d in api["analyze"].timeline.devices}
    report_busy = _per_device(report["headline"]["devices"], "device", "busy_us")
    for d in analyze["devices"]:
        busy = Figure(f"GPU {d['device']} busy (us)")
        busy.add("analyze", d["busy_us"])
        busy.add("report headline", report_busy.get(d["device"]))
        busy.add("api analyze", api_busy.get(d["device"]))
        if not steps["from_markers"] and rows == 1:
            busy.add("steps (whole trace)", _step_sums(steps, "busy_us").get(d["device"], 0.0))
        yield busy
        idle = Figure(f"GPU {d['device']} idle = window - busy (us)", tolerance=2 * US)
        idle.add("analyze", d["idle_us"])
        idle.add("analyze window - busy", analyze["window_us"] - d["busy_us"])
        if not steps["from_markers"] and rows == 1:
            idle.add("steps (whole trace)", _step_sums(steps, "idle_us").get(d["device"]))
        yield idle

    # Over the step windows: analyze --steps (all of them) against the sums over `steps` (windows that do not
    # overlap: each instant counted once either way).
    scoped = v.get("analyze --steps")
    if scoped is not None and steps["overlapping_steps"] == 0:
        for field_name, key in (
            ("busy_us", "busy_us"),
            ("idle_us", "idle_us"),
            ("comm_us", "communication_us"),
        ):
            summed = _step_sums(steps, field_name)
            for d in scoped["devices"]:
                fig = Figure(f"GPU {d['device']} {key} over the steps (us)", tolerance=US * (rows + 1))
                fig.add("analyze --steps", d[key])
                fig.add("steps (summed)", summed.get(d["device"], 0.0))
                yield fig
        comm = Figure("communication over the steps (us)", tolerance=US * (rows + 1))
        comm.add("analyze --steps", sum(d["communication_us"] for d in scoped["devices"]))
        comm.add("steps (summed)", sum(_step_sums(steps, "comm_us").values()))
        yield comm

    # Over the scope of the comparisons (the step windows, or the whole trace; docs/compare.md): `diff` and `ranks`
    # give per-step means when the trace has steps; times the step count, the sums over `steps`.
    (rank,) = v["ranks"]["ranks"]
    headline = {f["key"]: f for f in v["diff"]["headline"]}
    count = rank["steps"] if v["ranks"]["per_step"] else 1
    if steps["overlapping_steps"] == 0:
        scale = Figure("scope length (us)", tolerance=US * (rows + 1))
        scale.add("steps (summed wall)", sum(s["wall_us"] for s in steps["steps"]))
        scale.add("ranks", rank["step_us"] * count)
        scale.add("diff", headline["time"]["before"] * (count if v["diff"]["per_step"] else 1))
        if not steps["from_markers"]:
            scale.add("analyze", analyze["window_us"])
        yield scale
        busy_all = Figure("GPU busy over the scope, summed over GPUs (us)", tolerance=US * (rows + 1))
        busy_all.add("steps (summed)", sum(_step_sums(steps, "busy_us").values()))
        busy_all.add("ranks", rank["busy_us"] * count)
        busy_all.add("diff", headline["gpu_busy"]["before"] * (count if v["diff"]["per_step"] else 1))
        yield busy_all
        comm_all = Figure("communication over the scope, summed over GPUs (us)", tolerance=US * (rows + 1))
        comm_all.add("steps (summed)", sum(_step_sums(steps, "comm_us").values()))
        comm_all.add("ranks", rank["communication_us"] * count)
        if not steps["from_markers"]:
            comm_all.add("analyze", sum(d["communication_us"] for d in analyze["devices"]))
        yield comm_all

    # Per step: wall time in `steps`, the report and the critical path; busy in `steps` and the report.
    paths = {p["name"]: p for p in v["critical-path"]["steps"]}
    shown = {s["name"]: s for s in report["steps"]}
    report_paths = {p["name"]: p for p in report["critical_path"]["steps"]}
    for s in steps["steps"]:
        wall = Figure(f"{s['name']} wall (us)")
        wall.add("steps", s["wall_us"])
        if steps["from_markers"]:
            wall.add("report steps", shown.get(s["name"], {}).get("wall_us"))
            wall.add("critical-path", paths.get(s["name"], {}).get("wall_us"))
            wall.add("report critical path", report_paths.get(s["name"], {}).get("wall_us"))
        yield wall
        if steps["from_markers"] and s["name"] in shown and s["devices"]:
            busy = Figure(f"{s['name']} busy, mean over GPUs (us)")
            busy.add("steps", sum(d["busy_us"] for d in s["devices"]) / len(s["devices"]))
            busy.add("report steps", shown[s["name"]]["busy_us"])
            yield busy

    # The critical path equals its span (docs/critical-path.md), and the report's is the command's.
    for p in v["critical-path"]["steps"]:
        span = Figure(f"{p['name']} critical path = span (us)", relative=PATH_SPAN)
        span.add("path", p["path_us"])
        span.add("span", p["span_us"])
        span.add("sum of the breakdown", sum(p["breakdown"].values()))
        span.add("report critical path", report_paths.get(p["name"], {}).get("path_us"))
        yield span

    # Memory peaks per device (docs/memory.md).
    report_memory = {d["device"]: d for d in report["memory"]["devices"]}
    analyze_memory = {d["device"]: d for d in (analyze.get("memory") or {}).get("devices", [])}
    for d in v["memory"]["devices"]:
        for key in ("peak_allocated_bytes", "peak_reserved_bytes"):
            peak = Figure(f"{d['device']} {key}", tolerance=0)
            peak.add("memory", d[key])
            peak.add("report", report_memory.get(d["device"], {}).get(key))
            peak.add("analyze", analyze_memory.get(d["device"], {}).get(key))
            yield peak

    # Findings: the report shows advise's findings with their savings (docs/advice.md).
    report_findings = {f["id"]: f for f in report["findings"]}
    for f in analyze["findings"]:
        for key in ("time_at_stake_us", "predicted_saving_us"):
            saving = Figure(f"finding {f['id']} {key}")
            saving.add("analyze", f[key])
            saving.add("report", report_findings.get(f["id"], {}).get(key))
            yield saving
    ids = Figure("number of findings", tolerance=0)
    ids.add("analyze", len(analyze["findings"]))
    ids.add("report", len(report["findings"]))
    ids.add("api analyze", len(api["analyze"].advice.findings) if api["analyze"].advice else 0)
    yield ids


def disagreements(v: dict[str, Any]) -> list[str]:
    return [p for p in (f.problem() for f in figures(v)) if p is not None]


TRACE_FILES = corpus_traces()


@pytest.mark.corpus
@pytest.mark.slow
@pytest.mark.parametrize("relative", TRACE_FILES or ["(corpus missing)"])
def test_every_view_prints_the_same_figures(cli: Runner, relative: str) -> None:
    if not TRACE_FILES:
        pytest.skip(f"real-trace corpus not found at {TRACES} (set OPSCOPE_TRACES)")
    assert disagreements(views(cli, TRACES / relative)) == []


def test_the_corpus_is_all_there() -> None:
    """Not vacuous: the traces the manifest lists are found, of every format the readers take."""
    if not TRACE_FILES:
        pytest.skip(f"real-trace corpus not found at {TRACES} (set OPSCOPE_TRACES)")
    suffixes = {Path(t).suffix for t in TRACE_FILES}
    assert len(TRACE_FILES) >= 50 and {".gz", ".json", ".sqlite", ".pb", ".csv"} <= suffixes


# ---- a drift in one view is caught ---------------------------------------------------------------------------

SMALL = "hta/amd_trace_mi250_minitoy_train_ROCm6_2_kineto.json.gz"  # two steps, every view has figures


def _small(cli: Runner) -> dict[str, Any]:
    path = TRACES / SMALL
    if not path.exists():
        pytest.skip(f"corpus file missing: {path}")
    return views(cli, path)


@pytest.mark.corpus
def test_agreeing_views_pass(cli: Runner) -> None:
    assert disagreements(_small(cli)) == []


@pytest.mark.corpus
def test_a_drift_in_steps_is_caught(cli: Runner, monkeypatch: pytest.MonkeyPatch) -> None:
    """`steps` counts 1 µs too much busy time per step and device (as an NCCL-only or double-counted figure
    would): the check names the figures where steps and analyze / the report part."""
    from opscope.report import steps_view

    original = steps_view.steps_data

    def drifted(result: Any) -> dict[str, Any]:
        data = original(result)
        for s in data["steps"]:
            for d in s["devices"]:
                d["busy_us"] += 1.0
        return data

    monkeypatch.setattr(steps_view, "steps_data", drifted)
    found = disagreements(_small(cli))
    assert found and all("steps" in p for p in found)
    assert any(p.startswith("GPU 2 busy_us over the steps") for p in found)


@pytest.mark.corpus
def test_a_drift_in_the_efficiency_totals_is_caught(cli: Runner, monkeypatch: pytest.MonkeyPatch) -> None:
    """`efficiency` leaves GPU work out of its unsized total (as it did before issue 28)."""
    from opscope.report import efficiency_view

    original = efficiency_view.efficiency_data

    def drifted(result: Any) -> dict[str, Any]:
        data = original(result)
        data["totals"]["unsized_gpu_time_us"] -= 5.0
        return data

    monkeypatch.setattr(efficiency_view, "efficiency_data", drifted)
    found = disagreements(_small(cli))
    assert [p.split(":")[0] for p in found] == ["efficiency"]
    assert "efficiency sized + unsized" in found[0]


@pytest.mark.corpus
def test_a_drift_in_the_critical_path_is_caught(cli: Runner, monkeypatch: pytest.MonkeyPatch) -> None:
    """The path 1% longer than its span (what a loose edge weight would do) is caught; 0.05% is within the
    documented 0.1%."""
    from opscope.report import critical_path_view

    original = critical_path_view.critical_path_data

    def drifted(factor: float) -> Callable[..., dict[str, Any]]:
        def data(result: Any) -> dict[str, Any]:
            out = original(result)
            for s in out["steps"]:
                s["path_us"] *= factor
            return out

        return data

    monkeypatch.setattr(critical_path_view, "critical_path_data", drifted(1.01))
    found = disagreements(_small(cli))
    assert found and all("critical path = span" in p for p in found)
    monkeypatch.setattr(critical_path_view, "critical_path_data", drifted(1.0005))
    assert disagreements(_small(cli)) == []


def test_figure_tolerances() -> None:
    figure = Figure("x", {"a": 1.0, "b": 1.0 + US})
    assert figure.problem() is None
    figure.add("c", 1.01)
    assert figure.problem() == "x: a 1.000, b 1.001, c 1.010"
    assert Figure("y", {"a": 100.0, "b": 100.05}, relative=PATH_SPAN).problem() is None
    assert not math.isnan(Figure("z", {"only": 1.0}).values["only"])
