"""`StrategyComparison` -> `Document`: the `metric | baseline | variant | improvement` tables of `opscope bench`,
one per batch size and variant, with output-check and stability lines, and the `opscope.bench/1` JSON payload.

improvement: for times, speedup = baseline / variant ("1.52x faster", or "1.30x slower" when below 1, i.e.
variant / baseline = 1.30); for utilization, the difference in
percentage points. A batch size is stable when every run's latency IQR / median is at most `STABLE_IQR`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from opscope.report.document import TEXT, Column, Document, Table

if TYPE_CHECKING:
    from opscope.capture.compare import StrategyComparison, VariantRun

SCHEMA = "opscope.bench/1"
STABLE_IQR = 0.10
UTILIZATION = {
    "gpu_busy": "GPU busy: union of kernel/memcpy/memset time / profiled step time",
    "cpu_op_busy": "CPU: share of profiled step wall time with at least one CPU operator running",
}


def _ratio(before: float | None, after: float | None) -> float | None:
    return before / after if before and after else None


def _run_data(run: VariantRun) -> dict[str, Any]:
    figures, accuracy, latency = run.figures, run.accuracy, run.latency
    return {
        "variant": run.variant,
        "error": run.error,
        "latency_ms": latency.as_dict(scale=1e3) if latency else None,
        "latency_samples_ms": [round(s * 1e3, 4) for s in run.latency_s],
        "key_op": None
        if figures is None or figures.key_op is None
        else {"name": figures.key_op, "ms_per_step": round((figures.key_op_ns or 0) / 1e6, 4)},
        "utilization": None
        if figures is None or figures.utilization is None
        else round(figures.utilization, 4),
        "profiled_steps": figures.steps if figures else None,
        "accuracy": None
        if accuracy is None
        else {
            "compute_dtype": accuracy.compute_dtype,
            "rtol": accuracy.rtol,
            "atol": accuracy.atol,
            "max_abs_error": accuracy.max_abs_error,
            "max_rel_error": accuracy.max_rel_error,
            "match": accuracy.match,
            "problem": accuracy.problem,
        },
        "trace": run.trace_path,
    }


def _comparison(base: VariantRun, run: VariantRun) -> dict[str, Any]:
    b_lat, v_lat = base.latency, run.latency
    b_fig, v_fig = base.figures, run.figures
    util = None
    if b_fig and v_fig and b_fig.utilization is not None and v_fig.utilization is not None:
        util = round((v_fig.utilization - b_fig.utilization) * 100, 2)
    speed = _ratio(b_lat.median if b_lat else None, v_lat.median if v_lat else None)
    key = _ratio(b_fig.key_op_ns if b_fig else None, v_fig.key_op_ns if v_fig else None)
    return {
        "variant": run.variant,
        "latency_speedup": _sig(speed),
        "key_op_speedup": _sig(key),
        "utilization_change_pp": util,
    }


def _sig(value: float | None) -> float | None:
    """Six significant digits: speedups span 0.001x to 1000x."""
    return None if value is None else float(f"{value:.6g}")


def _stability(result: StrategyComparison, batch: int) -> tuple[bool, str]:
    runs = [r for r in result.runs if r.batch_size == batch and r.latency is not None]
    spreads = [(r.variant, r.latency.relative_iqr) for r in runs if r.latency is not None]
    stable = all(s <= STABLE_IQR for _, s in spreads)
    parts = ", ".join(f"{name} {s * 100:.1f}%" for name, s in spreads)
    verdict = (
        f"stable (all <= {STABLE_IQR * 100:.0f}%)"
        if stable
        else f"UNSTABLE (above {STABLE_IQR * 100:.0f}%: rerun with more --repeats or on a quieter machine)"
    )
    return stable, f"batch {batch} stability: latency IQR/median {parts}; {verdict}"


def bench_data(result: StrategyComparison) -> dict[str, Any]:
    batches = []
    for batch in result.batch_sizes:
        runs = [r for r in result.runs if r.batch_size == batch]
        base = runs[0]
        stable, _ = _stability(result, batch)
        batches.append(
            {
                "batch_size": batch,
                "stable": stable,
                "runs": [_run_data(r) for r in runs],
                "comparisons": [_comparison(base, r) for r in runs[1:] if r.error is None],
            }
        )
    metric = next((r.figures.metric for r in result.runs if r.figures is not None), None)
    return {
        "schema": SCHEMA,
        "device": result.device,
        "timing": result.timing,
        "repeats": result.repeats,
        "warmup": result.warmup,
        "trace_steps": result.trace_steps,
        "utilization_metric": metric,
        "variants": [
            {"name": n, "description": d} for n, d in zip(result.variants, result.descriptions, strict=True)
        ],
        "batches": batches,
    }


def _ms(ns: float | None) -> str:
    return "—" if ns is None else f"{ns / 1e6:,.3f}"


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.1f}"


def _speed(ratio: float | None) -> str:
    if ratio is None:
        return "—"
    return f"{ratio:.2f}x faster" if ratio >= 1 else f"{1 / ratio:.2f}x slower"


def _table(base: VariantRun, run: VariantRun) -> Table:
    columns = (
        Column("metric", "metric", TEXT),
        Column("baseline", "baseline", TEXT),
        Column("variant", run.variant, TEXT),
        Column("improvement", "improvement", TEXT),
    )
    title = f"batch {run.batch_size}: {run.variant} vs baseline"
    if run.error is not None:
        return Table(
            name=f"bench_bs{run.batch_size}_{run.variant}",
            title=title,
            columns=columns,
            rows=(),
            footer=(f"{run.variant} failed: {run.error}",),
        )
    comparison = _comparison(base, run)
    b_fig, v_fig = base.figures, run.figures
    b_lat, v_lat = base.latency, run.latency
    util = comparison["utilization_change_pp"]
    rows = (
        {
            "metric": "end-to-end latency (ms)",
            "baseline": _ms(b_lat.median * 1e9 if b_lat else None),
            "variant": _ms(v_lat.median * 1e9 if v_lat else None),
            "improvement": _speed(comparison["latency_speedup"]),
        },
        {
            "metric": "key-op time (ms/step)",
            "baseline": _ms(b_fig.key_op_ns if b_fig else None),
            "variant": _ms(v_fig.key_op_ns if v_fig else None),
            "improvement": _speed(comparison["key_op_speedup"]),
        },
        {
            "metric": "utilization (%)",
            "baseline": _pct(b_fig.utilization if b_fig else None),
            "variant": _pct(v_fig.utilization if v_fig else None),
            "improvement": "—" if util is None else f"{util:+.1f} pp",
        },
    )
    footer = []
    accuracy = run.accuracy
    if accuracy is not None:
        verdict = "match" if accuracy.match else "MISMATCH"
        detail = accuracy.problem or (
            f"max abs error {accuracy.max_abs_error:.2e}, max rel {accuracy.max_rel_error:.2e}"
            f"; tolerance ({accuracy.compute_dtype}) rtol {accuracy.rtol:g}, "
            f"atol {accuracy.atol:g} x max|baseline|"
        )
        footer.append(f"outputs: {verdict} ({detail})")
    if b_fig and v_fig:
        footer.append(f"key op: baseline {b_fig.key_op or '—'}; {run.variant} {v_fig.key_op or '—'}")
    return Table(
        name=f"bench_bs{run.batch_size}_{run.variant}",
        title=title,
        columns=columns,
        rows=rows,
        footer=tuple(footer),
    )


def bench_document(result: StrategyComparison) -> Document:
    data = bench_data(result)
    tables: list[Table] = []
    for batch in result.batch_sizes:
        runs = [r for r in result.runs if r.batch_size == batch]
        group = [_table(runs[0], r) for r in runs[1:]]
        _, line = _stability(result, batch)
        if group:
            last = group[-1]
            group[-1] = Table(last.name, last.title, last.columns, last.rows, (*last.footer, line))
        else:
            group = [Table(f"bench_bs{batch}", f"batch {batch}: baseline only", (), (), (line,))]
        tables.extend(group)
    facts = (
        ("device", result.device),
        ("timing", f"{result.timing}; median of {result.repeats} runs after {result.warmup} warm-up call(s)"),
        ("traces", f"{result.trace_steps} profiled calls per variant and batch size"),
        ("utilization", UTILIZATION.get(data["utilization_metric"] or "", "—")),
        (
            "variants",
            "; ".join(f"{n}: {d}" for n, d in zip(result.variants, result.descriptions, strict=True)),
        ),
    )
    return Document(title="Strategy comparison", data=data, facts=facts, tables=tuple(tables))
