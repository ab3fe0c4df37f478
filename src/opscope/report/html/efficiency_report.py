"""The HTML report's efficiency view (`efficiency` key of `opscope.report/1`): the rows of `opscope
efficiency` (op names through the report's string table) and the device's roofs, which report/html/assets/
efficiency.js draws as a roofline (compute-family ops as points sized by their time) and a table. On a trace
without GPU activity the analysis measures the ops' CPU time (`basis` "cpu"); `time_us` is the time each figure
was measured over, GPU or CPU."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opscope.analysis.efficiency.peaks import DTYPE_COLUMNS
from opscope.analysis.efficiency.table import Efficiency, EfficiencyRow
from opscope.report.efficiency_view import row_data

SOURCE = "analysis/efficiency/ (as opscope efficiency)"


def _significant(value: float | None) -> float | None:
    return None if value is None else float(f"{value:.6g}")


def _cpu_rates(row: EfficiencyRow, cpu: bool) -> dict[str, Any]:
    """A CPU's rates are a thousandth of a GPU's: six significant digits, not six decimals of TFLOP/s and TB/s."""
    if not cpu:
        return {}
    return {
        "achieved_tflops": _significant(row.achieved_tflops),
        "achieved_tbps": _significant(row.achieved_tbps),
    }


def efficiency_report(result: Efficiency, strings: Callable[[str | None], int]) -> dict[str, Any]:
    """`result`: `opscope efficiency --top 500` over the report's devices and streams (the bundle's)."""
    peaks = result.peaks
    cpu = result.basis == "cpu"
    return {
        "device": result.device,
        "peaks": None
        if peaks is None
        else {
            "name": peaks.name,
            "source": peaks.source,
            "bandwidth_tbps": peaks.bandwidth_tbps,
            "tflops": {c: peaks.tflops[c] for c in DTYPE_COLUMNS if peaks.tflops[c] is not None},
        },
        "basis": result.basis,
        "rows": [
            {**row_data(r), **_cpu_rates(r, cpu), "op": strings(r.op), "time_us": round(r.time_us, 3)}
            for r in result.rows
        ],
        "rows_total": result.total_rows,
        "unsized": [
            {
                "op": strings(u.op),
                "shape": u.shape,
                "calls": u.calls,
                "gpu_time_us": round(u.gpu_time_us, 3),
                "time_us": round(u.time_us, 3),
                "reason": u.reason,
            }
            for u in result.unsized
        ],
        "gpu_time_us": round(result.gpu_time_ns / 1e3, 3),
        "sized_gpu_time_us": round(result.sized_gpu_time_ns / 1e3, 3),
        "unsized_gpu_time_us": round(result.unsized_gpu_time_ns / 1e3, 3),
        "why_nothing_sized": result.why_nothing_sized,  # the CLI's note, word for word
        "time_us": round((result.cpu_time_ns if cpu else result.gpu_time_ns) / 1e3, 3),
        "sized_time_us": round((result.sized_cpu_time_ns if cpu else result.sized_gpu_time_ns) / 1e3, 3),
    }
