"""Benchmark the attribution analyses (link, ops, tree, steps) against `summary` on the same in-memory trace.

A real trace (default: the 82k-event 2021 ResNet-50 Kineto trace of the corpus) is tiled K times in memory:
each copy shifted in time past the previous one, with correlation, flow and External ids offset, so that the
copies link exactly like the original. For each size every analysis runs on the same loaded `Trace` and the
script prints its time, its ratio to `kernel_summary` (what `opscope summary` computes after loading) and the
time per million events, which stays flat when nothing is quadratic. Results also go to
bench/out/attribution_bench.json.

With --files, it instead times whole commands end to end (a fresh interpreter each, warm cache, as a user
runs them): `opscope summary` against `ops`, `tree` and `steps` on each given trace file (for instance the
~1 GB trace written by bench/make_big_trace.py).

    python bench/bench_attribution.py                  # tiles 1, 4, 16 (82k .. 1.3M events)
    python bench/bench_attribution.py --tiles 1 2 --trace PATH
    python bench/bench_attribution.py --files bench/out/BIG.pt.trace.json.gz
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import polars as pl

import opscope
from _timing import best_of  # bench/_timing.py; bench scripts run with bench/ on sys.path
from opscope.analysis.attribution.ops import OpOptions, op_stats
from opscope.analysis.attribution.steps import step_stats
from opscope.analysis.attribution.tree import TreeOptions, op_tree
from opscope.analysis.base.linking import link
from opscope.analysis.kernels.summary import SummaryOptions, kernel_summary
from opscope.model.schema import Col
from opscope.model.trace import Trace

BENCH = Path(__file__).resolve().parent
DEFAULT = (
    BENCH.parent.parent
    / "shared"
    / "traces"
    / "kineto"
    / "plugin_samples_resnet50_num_workers_0_worker0.pt.trace.json.gz"
)


def tile(trace: Trace, copies: int) -> Trace:
    frame = trace.events
    lo = int(frame[Col.TS_NS].min() or 0)
    hi = int((frame[Col.TS_NS] + frame[Col.DUR_NS].fill_null(0)).max() or 0)
    span = hi - lo + 1_000_000
    ids = [Col.CORRELATION, Col.FLOW_ID, Col.EXTERNAL_ID, Col.PY_ID, Col.PY_PARENT_ID]
    shift = max(int(frame.select(pl.max_horizontal(*(pl.col(c).max() for c in ids))).item() or 0), 0) + 1
    parts = [
        frame.with_columns(pl.col(Col.TS_NS) + k * span, *((pl.col(c) + k * shift) for c in ids))
        for k in range(copies)
    ]
    return Trace.from_frame(trace.meta, pl.concat(parts))


def end_to_end(paths: list[str], repeat: int) -> list[dict[str, object]]:
    """Each command in its own interpreter with a warm cache (one untimed summary run fills it first)."""
    env = {**os.environ, "PYTHONPATH": str(BENCH.parent / "src")}
    code = "import sys; from opscope.cli.main import main; sys.exit(main(sys.argv[1:]))"
    out = []
    for path in paths:

        def run(*argv: str, target: str = path) -> float:
            start = time.perf_counter()
            subprocess.run(
                [sys.executable, "-c", code, *argv, target, "--format", "json"],
                check=True,
                env=env,
                stdout=subprocess.DEVNULL,
            )
            return time.perf_counter() - start

        run("summary")
        seconds = {cmd: min(run(cmd) for _ in range(repeat)) for cmd in ("summary", "ops", "tree", "steps")}
        print(f"{path}")
        for cmd, value in seconds.items():
            print(f"  {cmd:>8} {value:8.2f} s  {value / seconds['summary']:6.2f} x summary")
        out.append({"path": path, "seconds": seconds})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trace", default=str(DEFAULT))
    parser.add_argument("--tiles", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--repeat", type=int, default=2, help="best of N runs per figure")
    parser.add_argument("--files", nargs="+", default=None, help="time whole commands on these trace files")
    args = parser.parse_args()
    if args.files:
        results_e2e = end_to_end(args.files, args.repeat)
        (BENCH / "out").mkdir(exist_ok=True)
        (BENCH / "out" / "attribution_e2e.json").write_text(
            json.dumps({"schema": "opscope.bench.attribution_e2e/1", "results": results_e2e}, indent=2)
        )
        return
    base = opscope.load(args.trace)
    results = []
    print(f"{'events':>10} {'analysis':>8} {'seconds':>8} {'x summary':>10} {'s / M events':>13}")
    for copies in args.tiles:
        trace = tile(base, copies)
        events = trace.count()
        linkage = link(trace)
        runs = {
            "summary": lambda t=trace: kernel_summary(t, SummaryOptions(top=0)),
            "link": lambda t=trace: link(t),
            "ops": lambda t=trace, lk=linkage: op_stats(t, OpOptions(top=0), lk),
            "tree": lambda t=trace, lk=linkage: op_tree(t, TreeOptions(), lk),
            "steps": lambda t=trace, lk=linkage: step_stats(t, None, lk),
            "ops+link": lambda t=trace: op_stats(t, OpOptions(top=0)),
        }
        seconds = {name: best_of(fn, args.repeat) for name, fn in runs.items()}
        for name, value in seconds.items():
            ratio = value / seconds["summary"]
            print(f"{events:>10,} {name:>8} {value:>8.3f} {ratio:>10.2f} {value / events * 1e6:>13.3f}")
        results.append({"copies": copies, "events": events, "seconds": seconds})
    first, last = results[0], results[-1]
    growth = last["events"] / first["events"]
    for name in ("link", "ops", "tree", "steps"):
        scale = last["seconds"][name] / first["seconds"][name]
        print(f"{name}: {growth:.0f}x events -> {scale:.1f}x time (linear would be {growth:.0f}x)")
    out = BENCH / "out"
    out.mkdir(exist_ok=True)
    (out / "attribution_bench.json").write_text(
        json.dumps(
            {"schema": "opscope.bench.attribution/1", "trace": args.trace, "results": results}, indent=2
        )
    )


if __name__ == "__main__":
    main()
