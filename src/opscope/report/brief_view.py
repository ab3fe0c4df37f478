"""`opscope brief`: a trace in at most 15 plain-language lines, written by templates from computed results.

No language model: each line is a fixed sentence filled with figures of `opscope analyze` and the ranked
findings of `opscope advise` (with their predicted savings), so the same trace gives the same words. The lines
are (label, text) pairs: the capture, the GPU's busy and idle time, the categories, the top kernel and op, up
to three fixes (what, how much, the code the evidence names) and what is left out. The terminal, Markdown and
JSON show them through the usual renderers (`Document.facts`); the HTML report shows the same pairs as its
first panel (`opscope.report/1` field `brief`). Figures are defined where their commands document them
(docs/analysis-timeline.md, docs/advice.md); docs/mcp.md describes the lines.
"""

from __future__ import annotations

from typing import Any

from opscope.analysis.findings import Advice, Finding
from opscope.analysis.overview import Analysis
from opscope.analysis.rules.model import WINDOW
from opscope.analysis.rules.registry import RULES
from opscope.model.meta import TraceMeta
from opscope.report.document import Document
from opscope.report.frame_names import short_frame
from opscope.report.names import shorten

SCHEMA = "opscope.brief/1"
FIXES = 3  # findings told, the most time at stake first
NAME_WIDTH = 72  # kernel, op and Python frame names are shortened to this many characters
# evidence fields that name code, most precise first: `frame` is the user's line that launched the evidence's
# GPU work (traces with Python stacks, docs/analysis-attribution.md section 4)
CODE_KEYS = ("frame", "python", "op", "call", "copy", "kernel")
FORMATS = {
    "kineto": "PyTorch profiler (Kineto)",
    "nsys": "Nsight Systems",
    "rocprof": "rocprofv3",
    "rocprof-csv": "rocprof CSV",
    "xplane": "JAX / XLA (xplane)",
}
BASIS = {rule.id: rule.basis for rule in RULES}

Line = tuple[str, str]


def duration(ns: float) -> str:
    """A duration for reading: 1.23 s, 45.6 ms, 789 us, 12 ns."""
    if ns >= 1e9:
        return f"{ns / 1e9:,.2f} s"
    if ns >= 1e6:
        return f"{ns / 1e6:,.1f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:,.0f} us"
    return f"{ns:,.0f} ns"


def pct(share: float) -> str:
    return f"{share * 100:.1f}%"


def brief_lines(result: Analysis, meta: TraceMeta) -> tuple[Line, ...]:
    lines = [("Capture", _capture(result, meta)), ("GPU time", _gpu_time(result))]
    if result.categories.rows:
        lines.append(("Where it goes", _categories(result)))
    if result.kernels:
        k = result.kernels[0]
        lines.append(
            (
                "Top kernel",
                f"{shorten(k.name, NAME_WIDTH)} ({k.category}): {pct(k.share)} of GPU time, {k.calls:,} calls, "
                f"{duration(k.total_ns)}.",
            )
        )
    if result.ops.rows and result.ops.rows[0].gpu_self_ns > 0:
        o = result.ops.rows[0]
        lines.append(
            (
                "Top op",
                f"{shorten(o.name, NAME_WIDTH)}: {duration(o.gpu_self_ns)} of GPU time in the kernels it launches "
                f"itself, {o.calls:,} calls.",
            )
        )
    lines += _fixes(result.advice)
    lines += _caveats(result, meta)
    return tuple(lines)


def _capture(result: Analysis, meta: TraceMeta) -> str:
    source = FORMATS.get(meta.format, meta.format)
    rank = f", rank {meta.rank} of {meta.world_size}" if meta.rank is not None and meta.world_size else ""
    devices = f" on {', '.join(result.device_names)}" if result.device_names else ""
    tl = result.timeline
    text = f"{source} trace{rank}{devices}: {tl.gpu_events:,} GPU events in a {duration(tl.window_ns)} window"
    steps = result.steps
    if steps.from_markers and steps.rows:
        walls = [r.window.end_ns - r.window.start_ns for r in steps.rows]
        many = len(walls) != 1
        text += f", {len(walls)} profiler step{'s' if many else ''} of {duration(sum(walls) / len(walls))}"
        text += " on average" if many else ""
    return text + "."


def _gpu_time(result: Analysis) -> str:
    devices = [d for d in result.timeline.devices if d.events]
    if not devices:
        return "No GPU activity in the analysed window (a CPU-only capture, or GPU events missing)."
    idle = {i.device: i for i in result.idle.devices}
    host = sum(idle[d.device].host_wait_ns for d in devices if d.device in idle)
    sync = sum(idle[d.device].sync_wait_ns for d in devices if d.device in idle)
    other = sum(idle[d.device].other_ns for d in devices if d.device in idle)
    idle_ns = sum(d.idle_ns for d in devices)
    if len(devices) == 1:
        d = devices[0]
        head = f"GPU {d.device} busy {duration(d.busy_ns)} = {pct(d.utilization)} of the window"
    else:
        low, high = min(d.utilization for d in devices), max(d.utilization for d in devices)
        head = f"{len(devices)} GPUs busy {pct(low)} to {pct(high)} of the window"
    return (
        f"{head}; idle {duration(idle_ns)}: {duration(host)} waiting for the host to launch work, "
        f"{duration(sync)} in synchronisations, {duration(other)} other."
    )


def _categories(result: Analysis) -> str:
    rows = result.categories.rows
    shown = ", ".join(f"{r.category} {pct(r.share)}" for r in rows[:3])
    rest = sum(r.share for r in rows[3:])
    return f"{shown}{f'; the rest {pct(rest)}' if rows[3:] else ''} of GPU time."


def _fixes(advice: Advice | None) -> list[Line]:
    if advice is None:
        return []
    if not advice.findings:
        return [
            ("Fixes", f"none found: no rule of the {len(advice.rules_checked)} checked fired on this trace.")
        ]
    lines = []
    for number, f in enumerate(advice.findings[:FIXES], start=1):
        basis = "the window" if BASIS.get(f.id) == WINDOW else "GPU time"
        if f.predicted_saving_ns is None:
            saving = "no predicted saving (the remedy is not modelled)"
        elif f.predicted_saving_ns <= 0:
            saving = "predicted saving none (the critical path would not get shorter)"
        else:
            saving = f"predicted saving {duration(f.predicted_saving_ns)} ({f.saving_label})"
            if f.saving_low_ns is not None and f.saving_high_ns is not None:
                saving += (
                    f"; between {duration(f.saving_low_ns)} and {duration(f.saving_high_ns)} as measured "
                    f"({f.calibration})"
                )
        lines.append(
            (
                f"Fix {number}",
                f"{f.title} [{f.severity}]: {duration(f.time_at_stake_ns)} at stake ({pct(f.share)} of {basis}); "
                f"{saving}.",
            )
        )
        code = _code(f)
        how = _first_sentence(f.advice)
        lines.append(("How", f"{how}{' Code: ' + code + '.' if code else ''}"))
    return lines


def _code(finding: Finding) -> str:
    """The code the finding's evidence names: its Python frames, ops, calls or kernels, two at most."""
    found: list[str] = []
    for item in finding.evidence:
        for key in CODE_KEYS:
            value = item.get(key)
            if isinstance(value, str) and value:
                name = short_frame(value) if key == "frame" else shorten(value, NAME_WIDTH)
                if name not in found:
                    found.append(name)
                break
        if len(found) == 2:
            break
    return ", ".join(found)


def _first_sentence(text: str) -> str:
    head, sep, _ = text.partition(". ")
    return head + "." if sep else text


def _caveats(result: Analysis, meta: TraceMeta) -> list[Line]:
    notes = []
    if result.advice is not None and len(result.advice.findings) > FIXES:
        notes.append(f"{len(result.advice.findings) - FIXES} more findings (advise lists them with evidence)")
    if result.unattributed_share >= 0.10:
        notes.append(f"{pct(result.unattributed_share)} of GPU time has no launching op in the trace")
    if meta.truncated:
        notes.append("the trace file was cut off: the figures cover what was read")
    return [("Also", "; ".join(notes) + ".")] if notes else []


def brief_data(result: Analysis, meta: TraceMeta) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "trace": {"path": result.path, "format": meta.format, "devices": list(result.device_names)},
        "steps_spec": result.options.steps,
        "lines": [{"label": label, "text": text} for label, text in brief_lines(result, meta)],
        "findings": [f.id for f in (result.advice.findings if result.advice else ())],
    }


def brief_document(data: dict[str, Any]) -> Document:
    """The lines as the document's facts: `label: text`, one a line, in every text format."""
    return Document(
        title=f"opscope brief: {data['trace']['path']}",
        data=data,
        facts=tuple((line["label"], line["text"]) for line in data["lines"]),
    )
