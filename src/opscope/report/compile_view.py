"""`CompileCheck` -> `Document`: the `opscope.compile/1` payload and the compile-check tables."""

from __future__ import annotations

from typing import Any

from opscope.analysis.compile.compiling import Compiling
from opscope.analysis.compile.regions import CompileCheck
from opscope.report.document import INT, MS, NAME, PCT, TEXT, Column, Document, Table

SCHEMA = "opscope.compile/1"


def _us(ns: int) -> float:
    return round(ns / 1e3, 3)


def compile_data(result: CompileCheck, violations: list[str]) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "trace": {"path": result.path},
        "regions": [
            {
                "name": r.name,
                "kind": r.kind,
                "frame": r.frame,
                "compile_id": r.compile_id,
                "step": r.step,
                "nested": r.nested,
                "start_us": _us(r.start_ns),
                "dur_us": _us(r.dur_ns),
                "gpu_us": _us(r.gpu_ns),
            }
            for r in result.regions
        ],
        "regions_per_step": [{"step": step, "regions": n} for step, n in result.regions_per_step],
        "frames": list(result.frames),
        "graph_breaks": result.graph_breaks,
        "nested_regions": result.nested_regions,
        "recompiles": result.recompiles,
        "fused_kernels": [
            {
                "name": k.name,
                "kind": k.kind,
                "ops": list(k.ops),
                "calls": k.calls,
                "total_us": _us(k.total_ns),
                "on_gpu": k.on_gpu,
            }
            for k in result.fused
        ],
        "eager_kernels_in_regions": [
            {"name": k.name, "op": k.op, "calls": k.calls, "total_us": _us(k.total_ns)}
            for k in result.eager_in_regions
        ],
        "compiling": [
            {
                "step": c.step,
                "compile_ids": list(c.compile_ids),
                "autotuned_kernels": list(c.autotuned_kernels),
                "first_us": _us(c.first_ns),
                "last_us": _us(c.last_ns),
            }
            for c in result.compiling
        ],
        "compiled_gpu_us": _us(result.compiled_gpu_ns),
        "gpu_us": _us(result.gpu_ns),
        "violations": violations,
    }


def _compiling(item: Compiling) -> str:
    """One line: where, which compile ids, how many kernels autotuned."""
    where = f"step {item.step}" if item.step is not None else "outside the steps"
    tuned = len(item.autotuned_kernels)
    return (
        f"{where}: compile ids {', '.join(item.compile_ids) or 'none named'}"
        + (f"; {tuned} Triton {'kernel' if tuned == 1 else 'kernels'} autotuned" if tuned else "")
        + f"; markers over {(item.last_ns - item.first_ns) / 1e6:,.1f} ms"
    )


def _breaks(result: CompileCheck) -> str:
    nested = f"{result.nested_regions:,} nested {'region' if result.nested_regions == 1 else 'regions'}"
    if result.graph_breaks is None:
        forward = sum(r.kind == "forward" and not r.nested for r in result.regions)
        return (
            f"not recorded (CompiledFunction regions carry no frame id; {forward:,} compiled forward "
            f"{'graph' if forward == 1 else 'graphs'} ran; {nested})"
        )
    return f"{result.graph_breaks:,} ({nested})"


def compile_document(result: CompileCheck, violations: list[str], top: int = 20) -> Document:
    share = result.compiled_gpu_ns / result.gpu_ns if result.gpu_ns else 0.0
    steps = (
        ", ".join(
            f"{'step ' + str(s) if s is not None else 'outside steps'}: {n}"
            for s, n in result.regions_per_step
        )
        or "none"
    )
    facts = (
        ("trace", result.path),
        ("compiled regions", f"{len(result.regions):,} ({steps})"),
        ("compiled frames", ", ".join(map(str, result.frames)) or "none"),
        ("graph breaks", _breaks(result)),
        ("recompiles", str(result.recompiles)),
        (
            "compiling while profiled",
            "; ".join(_compiling(c) for c in result.compiling)
            + " (those steps are not the steady state: profile after the first calls, e.g. "
            "opscope.profile(wait=1, warmup=1, active=3))"
            if result.compiling
            else "no",
        ),
        (
            "GPU time launched in compiled regions",
            f"{result.compiled_gpu_ns / 1e6:,.3f} ms ({share * 100:.1f}%)",
        ),
    )
    fused = Table(
        "fused",
        "Inductor kernels and the ops they fused",
        (
            Column("name", "Kernel", NAME),
            Column("kind", "Kind", TEXT),
            Column("ops", "Fused ops", TEXT),
            Column("calls", "Calls", INT),
            Column("total", "Total ms", MS),
        ),
        tuple(
            {"name": k.name, "kind": k.kind, "ops": ", ".join(k.ops), "calls": k.calls, "total": k.total_ns}
            for k in result.fused[: top or None]
        ),
        hide_when_empty=True,  # without compiled regions the note says why
    )
    eager = Table(
        "eager",
        "Other kernels launched inside compiled regions (extern or not lowered)",
        (
            Column("name", "Kernel", NAME),
            Column("op", "Launching op", TEXT),
            Column("calls", "Calls", INT),
            Column("total", "Total ms", MS),
            Column("share", "Share", PCT),
        ),
        tuple(
            {
                "name": k.name,
                "op": k.op or "—",
                "calls": k.calls,
                "total": k.total_ns,
                "share": k.total_ns / result.gpu_ns if result.gpu_ns else 0.0,
            }
            for k in result.eager_in_regions[: top or None]
        ),
        hide_when_empty=True,
    )
    notes = [f"violation: {v}" for v in violations]
    if not result.regions:
        notes.append(
            "No 'Torch-Compiled Region' events: this trace ran no torch.compile'd code (or predates them)."
        )
    notes.append("Definitions: docs/advice.md (compile-check).")
    return Document(
        title="torch.compile check",
        data=compile_data(result, violations),
        facts=facts,
        tables=tuple(t for t in (fused, eager) if t.rows) or (fused,),
        notes=tuple(notes),
    )
