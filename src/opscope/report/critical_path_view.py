"""`CriticalPathStats` -> `Document` (and the stable `opscope.critical_path/1` JSON payload)."""

from __future__ import annotations

from typing import Any

from opscope.analysis.critical_path.host_time import StepHostTime
from opscope.analysis.critical_path.kinds import EDGE_KINDS
from opscope.analysis.critical_path.path import PathResult
from opscope.analysis.critical_path.stats import CriticalPathStats, StepPath
from opscope.report.document import MS, NAME, PCT, TEXT, Column, Document, Table
from opscope.report.linking_view import us

SCHEMA = "opscope.critical_path/1"
TERMINAL_STEPS = 200  # steps the terminal and Markdown show (the first ones); JSON and CSV have every one
LABELS = {
    "cpu_bound": "CPU",
    "gpu_compute_bound": "GPU",
    "gpu_communication_bound": "Comm",
    "gpu_kernel_kernel_overhead": "K-K gap",
    "gpu_kernel_launch_overhead": "Launch",
    "sync_wait": "Sync",
    "memcpy": "Memcpy",
    "gpu_backlog": "Backlog",
}
MODEL_NOTE = (
    "What-if is a model, not a measurement: the matching events are rescaled and the longest path is "
    "recomputed with the same launch order and the same dependencies; launch delays and "
    "kernel-to-kernel gaps keep their observed size."
)


def _label(step: StepPath) -> str:
    return step.window.name if step.window.step is None else str(step.window.step)


def _path_data(path: PathResult) -> dict[str, Any]:
    return {
        "path_us": us(path.length_ns),
        "breakdown": {k: us(v) for k, v in path.breakdown_ns.items()},
        "top": [
            {"name": t.name, "kind": t.kind, "on_path_us": us(t.on_path_ns), "total_us": us(t.total_ns)}
            for t in path.top
        ],
    }


def critical_path_data(result: CriticalPathStats) -> dict[str, Any]:
    """With `result.hosts` (the path's host time between operators per step, `host_frames`), each step also
    has `host_between_ops_us` and `host_frames` ([{"frame", "on_path_us"}])."""
    hosts = result.hosts
    steps = []
    for i, s in enumerate(result.steps):
        entry: dict[str, Any] = {
            "step": s.window.step,
            "name": s.window.name,
            "start_us": us(s.window.start_ns),
            "wall_us": us(s.window.dur_ns),
            "span_us": us(s.span_ns),
            **_path_data(s.path),
        }
        if s.predicted is not None:
            entry["what_if"] = {
                "predicted_us": us(s.predicted.length_ns),
                "saving_us": us(s.saving_ns or 0),
                "breakdown": {k: us(v) for k, v in s.predicted.breakdown_ns.items()},
            }
        if hosts is not None and i < len(hosts):
            entry["host_between_ops_us"] = us(hosts[i].between_ops_ns)
            entry["host_frames"] = [
                {"frame": f.frame, "on_path_us": us(f.on_path_ns)} for f in hosts[i].frames
            ]
        steps.append(entry)
    return {
        "schema": SCHEMA,
        "trace": {"path": result.path},
        "from_markers": result.from_markers,
        "kinds": list(EDGE_KINDS),
        "what_if": [{"pattern": w.pattern, "factor": w.factor} for w in result.what_ifs],
        "model": MODEL_NOTE if result.what_ifs else None,
        "steps": steps,
    }


def _host_table(result: CriticalPathStats, hosts: tuple[StepHostTime, ...]) -> Table:
    rows = [
        {
            "step": _label(s),
            "frame": f.frame,
            "on_path": f.on_path_ns,
            "share": f.on_path_ns / (s.path.length_ns or 1),
            "between": h.between_ops_ns,
        }
        for s, h in zip(result.steps, hosts, strict=False)
        for f in h.frames
    ]
    return Table(
        "host_frames",
        "Host time on the path between operators, by Python frame (the innermost frame of your code)",
        (
            Column("step", "Step", TEXT),
            Column("frame", "Frame", NAME),
            Column("on_path", "On path ms", MS),
            Column("share", "Of path", PCT),
        ),
        tuple(rows),
        hide_when_empty=True,
        terminal_rows=TERMINAL_STEPS,
        rest="rows",
    )


def _host_note(result: CriticalPathStats, hosts: tuple[StepHostTime, ...]) -> str | None:
    """Without Python frames: how much of the path is host time between operators, and how to name it."""
    between = sum(h.between_ops_ns for h in hosts)
    path = sum(s.path.length_ns for s in result.steps) or 1
    if any(h.frames for h in hosts) or between < 0.01 * path:
        return None
    return (
        f"{between / 1e6:,.3f} ms of the path ({between / path * 100:.1f}%) is host time between operators (inside "
        "ProfilerStep / record_function ranges, no operator running): the trace has no Python frames to name it; "
        "record with opscope.profile(..., with_stack=True) and this table names the lines."
    )


def critical_path_document(result: CriticalPathStats) -> Document:
    hosts = result.hosts
    step_cols = [Column("step", "Step", TEXT), Column("wall", "Wall ms", MS), Column("path", "Path ms", MS)]
    shown = [k for k in EDGE_KINDS if any(s.path.breakdown_ns.get(k) for s in result.steps)]  # JSON keeps all
    step_cols += [Column(k, LABELS.get(k, k), PCT) for k in shown or EDGE_KINDS[:1]]
    if result.what_ifs:
        step_cols += [Column("predicted", "What-if ms", MS), Column("saving", "Saving ms", MS)]
    # CSV also gets the breakdown in µs (`<kind>_us`), after the shares.
    us_cols = tuple(Column(f"{k}_ns", LABELS.get(k, k), MS) for k in shown or EDGE_KINDS[:1])
    rows: list[dict[str, Any]] = []
    top_rows: list[dict[str, Any]] = []
    shown_top = 0  # the top rows of the steps the terminal shows
    for i, s in enumerate(result.steps):
        length = s.path.length_ns or 1
        row: dict[str, Any] = {"step": _label(s), "wall": s.window.dur_ns, "path": s.path.length_ns}
        row.update({k: v / length for k, v in s.path.breakdown_ns.items()})
        row.update({f"{k}_ns": v for k, v in s.path.breakdown_ns.items()})
        if s.predicted is not None:
            row.update(predicted=s.predicted.length_ns, saving=s.saving_ns)
        rows.append(row)
        top_rows += [
            {
                "step": _label(s),
                "name": t.name,
                "kind": t.kind,
                "on_path": t.on_path_ns,
                "share": t.on_path_ns / length,
                "total": t.total_ns,
            }
            for t in s.path.top
        ]
        if i < TERMINAL_STEPS:
            shown_top = len(top_rows)
    top_cols = (
        Column("step", "Step", TEXT),
        Column("name", "Name", NAME),
        Column("kind", "Kind", TEXT),
        Column("on_path", "On path ms", MS),
        Column("share", "Of path", PCT),
        Column("total", "Total ms", MS),
    )
    facts = [
        ("trace", result.path),
        (
            "windows",
            f"{len(result.steps)} ProfilerStep window(s)"
            if result.from_markers
            else "no ProfilerStep markers: one window over the whole trace",
        ),
    ]
    facts += [("what-if", f"{w.pattern!r} x {w.factor:g}") for w in result.what_ifs]
    notes = [
        "Path = the longest chain of dependent work (CPU program order and nesting, launches, GPU stream "
        "order, synchronisations) through the events that start in the step; it equals the span from the "
        "step's start to the end of its last work, which passes the step's end when the GPU runs behind "
        "the CPU. Kinds: docs/critical-path.md."
    ]
    if result.what_ifs:
        notes.append(MODEL_NOTE)
    host_note = _host_note(result, hosts) if hosts is not None else None
    if host_note:
        notes.append(host_note)
    return Document(
        title="Critical path",
        data=critical_path_data(result),
        facts=tuple(facts),
        tables=(
            Table(
                "steps",
                "Critical path per step",
                tuple(step_cols),
                tuple(rows),
                csv_extra=us_cols,
                terminal_rows=TERMINAL_STEPS,
                rest="steps",
            ),
            Table(
                "top",
                "On the critical path",
                top_cols,
                tuple(top_rows),
                terminal_rows=shown_top if len(result.steps) > TERMINAL_STEPS else None,
                rest="rows (of the steps not shown above)",
            ),
            *((_host_table(result, hosts),) if hosts is not None else ()),
        ),
        notes=tuple(notes),
    )
