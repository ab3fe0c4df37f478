"""Benchmark: every command on the unkind shapes of issue 57 (tests/unkind_traces.py: deep stacks, reused
correlation ids, identical timestamps, 10,000 short steps, unique names, thousands of threads and streams,
synchronisations among Python frames, cross-stream waits), 1x and 4x, against a cold `summary` of the same
trace, side by side.

For each shape and size the trace is generated (hand-made, labelled), a cold `summary` reads it (parse
included: the fastest of --repeat runs, each from no cache), then each command runs once with the trace cache
warm and nothing else kept beside it (its first run), in a process of its own (`bench_analyses.run`: wall time
until the process could exit, peak RSS of it and its workers). Printed: each command's time as a ratio to the
cold summary, its peak, and its memory growth from 1x to 4x against the trace's (the scale sweep's rule:
<= 1.25 x 4 above the interpreter). The issue's time target: `critical-path` and `advise` on 10,000 short
steps (many_steps at 4x) within 5x the cold summary; `--check` exits 1 when it is missed or a command fails.

Usage: python bench/bench_unkind.py [--shapes many_steps,deep_stacks] [--repeat 3] [--check] [--markdown]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench_analyses import run

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from unkind_traces import SHAPES  # noqa: E402

COMMANDS = (
    "analyze", "advise", "report", "critical-path", "memory", "efficiency", "steps", "ops", "tree", "lines",
    "brief", "history add", "export --folded",
)  # fmt: skip
UNITS = {"identical_timestamps": 4}
FACTOR = 4
TARGET = 5.0  # critical-path and advise on 10,000 short steps: at most 5x a cold summary
TARGETED = ("critical-path", "advise")


def argv_for(command: str, trace: Path, scratch: Path) -> list[str]:
    argv = [*command.split(), str(trace)]
    if command == "report":
        argv += ["-o", str(scratch / "report.html")]
    elif command.startswith("export"):
        argv += ["-o", str(scratch / "folded.txt")]
    elif command == "history add":
        argv += ["--db", str(scratch / "history.sqlite")]
    return argv


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--repeat", type=int, default=3, help="cold summaries per trace; the fastest counts")
    parser.add_argument(
        "--check", action="store_true", help="exit 1 when a target is missed or a command fails"
    )
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)
    rows: list[list[str]] = []
    missed: list[str] = []
    with tempfile.TemporaryDirectory(prefix="opscope-unkind-") as tmp:
        scratch = Path(tmp)
        env = {**os.environ, "OPSCOPE_CACHE_DIR": str(scratch / "cache"), "COLUMNS": "100"}
        base = run(["--version"], env)[1]
        for shape in args.shapes.split(","):
            peaks: dict[tuple[str, int], float] = {}
            for n in (1, FACTOR):
                doc = SHAPES[shape](UNITS.get(shape, 1) * n)
                trace = scratch / f"{shape}_x{n}.json"
                trace.write_text(json.dumps(doc))
                events = len(doc["traceEvents"])
                cold = float("inf")
                for _ in range(max(1, args.repeat)):
                    shutil.rmtree(scratch / "cache", ignore_errors=True)
                    cold = min(cold, run(["summary", str(trace), "--format", "json"], env)[0])
                for command in COMMANDS:
                    for kept in (scratch / "cache").glob("*.parquet.derived"):
                        shutil.rmtree(kept, ignore_errors=True)
                    try:
                        wall, peak = run(argv_for(command, trace, scratch), env)
                    except RuntimeError as exc:
                        missed.append(f"{shape} x{n} {command}: {str(exc)[-200:]}")
                        continue
                    peaks[(command, n)] = peak
                    ratio = wall / cold
                    if shape == "many_steps" and n == FACTOR and command in TARGETED and ratio > TARGET:
                        missed.append(
                            f"{shape} x{n} {command}: {ratio:.2f}x the cold summary (target {TARGET}x)"
                        )
                    rows.append(
                        [
                            shape,
                            f"x{n}",
                            f"{events:,}",
                            command,
                            f"{wall:.2f}",
                            f"{ratio:.2f}x",
                            f"{peak:.0f}",
                        ]
                    )
                    print("  " + "  ".join(rows[-1]), file=sys.stderr, flush=True)
                rows.append([shape, f"x{n}", f"{events:,}", "cold summary", f"{cold:.2f}", "1.00x", ""])
            for command in COMMANDS:
                one, four = peaks.get((command, 1)), peaks.get((command, FACTOR))
                if one is not None and four is not None and four - base > 1.25 * FACTOR * max(one - base, 1):
                    missed.append(f"{shape} {command}: {one:.0f} MB -> {four:.0f} MB, faster than the trace")
    header = ["shape", "size", "events", "command", "wall s", "/ cold summary", "peak MB"]
    print(f"unkind shapes, {time.strftime('%Y-%m-%d')}; interpreter {base:.0f} MB")
    if args.markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for row in rows:
            print("| " + " | ".join(row) + " |")
    else:
        widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header))]
        for row in (header, *rows):
            print("  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)))
    for line in missed:
        print(f"MISSED: {line}")
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    sys.exit(main())
