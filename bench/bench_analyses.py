"""Benchmark: every analysis command against `opscope summary` on the same trace, tiled 1x, 4x and 16x (or more),
as ratios measured side by side in one run, with each command's peak memory.

A real corpus trace is tiled end to end by `make_big_trace.py --distinct-steps` (each copy's ProfilerStep#N
renumbered, so the result reads as one longer capture). For each size, the trace is read once into the cache,
then every command runs in its own process (`python -m opscope.cli.main`-equivalent, so the peak RSS is the
command's own, measured by the kernel: `resource.getrusage(RUSAGE_CHILDREN)` of a fresh child), warm:

- the ratio of each command's wall time to a warm `summary` of the same trace (the issue's interactive target:
  <= 3x, `diff A B` <= 4x), and to a cold `summary` (parse included) for the largest size (<= 3x);
- peak RSS per command and size, and its growth from the smallest to the largest size against the growth of
  the trace (memory must grow no faster than the trace: the ratio `rss growth / size growth` <= ~1).

Each command's first run finds only the trace cache (the analysis results that commands keep beside it, such
as the link table and the op table, are removed first), so it computes everything; the runs after it read back
what it kept, as a second command on the same trace does. The wall time is the fastest run (with `--repeat 2`
or more: a run that reads the kept results), the peak RSS the largest (the first run's included); the column
"first / warm summary" is the first run's ratio (with `--first-runs N`, the fastest of N first runs, each with
the kept results removed again: on a noisy machine one run of a 10 s command moves by 10-30%; the cold
`summary` is then the fastest of N too, each from no cache). A run of a small trace takes well under a second,
so one disturbance moves its ratio by 50% (session 15: x4 read back `analyze` 0.45 s in one run, 0.66 s in
another); with `--small N`, the traces under SMALL_EVENTS events are run at least N times, first runs
included: the fastest of more runs at little cost.

Two sources (issue 57): `v100`, the V100 training step (68,692 events a copy, no Python frames; x64 is 1 GB of
JSON), and `owlv2`, the MI300X OWLv2 inference (130,780 events a copy, with_stack: Python frames and
synchronising calls among them; x16 is 1 GB of JSON); `--source` takes either name or a path.

Usage: python bench/bench_analyses.py [--source v100|owlv2|PATH] [--copies 1,4,16] [--repeat 1] [--first-runs 1]
       [--small 1] [--markdown]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from make_big_trace import DEFAULT_SOURCE, TRACES, make_big_trace

SOURCES = {
    "v100": DEFAULT_SOURCE,
    "owlv2": "tracelens/mi300__google_owlv2-large-patch14-ensemble__1016001.json.gz",
}
COMMANDS: tuple[tuple[str, ...], ...] = (
    ("summary",),
    ("analyze",),
    ("advise",),
    ("report",),  # -o a temporary file (added below)
    ("critical-path",),
    ("memory",),
    ("efficiency",),
    ("steps",),
    ("ops",),
    ("tree",),
    ("lines",),
    ("history", "add"),  # --db a temporary database (added below)
    ("diff",),  # the trace against itself
)
# Peak RSS of the command's own process image: VmHWM (ru_maxrss survives exec on Linux and would start at the
# size of this benchmark process), ru_maxrss where /proc is missing; plus the peak of every worker process the
# command started (`parallel.split_map`: the critical path's steps on a long trace), as each reported it: the
# sum bounds what they held together from above. The wall time ends when the process could exit: after the
# threads the interpreter waits for (the results kept beside the cache are written on threads of their own that
# may outlive `main`: x64 `steps` ~0.27 s), as a user waits for them.
CHILD = (
    "import re, resource, sys, threading, time\n"
    "from opscope.cli.main import main\n"
    "t = time.perf_counter(); rc = main(sys.argv[1:])\n"
    "for thread in threading.enumerate():\n"
    "    if thread is not threading.current_thread() and not thread.daemon:\n"
    "        thread.join()\n"
    "wall = time.perf_counter() - t\n"
    "from opscope.analysis.base.parallel import worker_peaks_kb  # after the timing: imported only here\n"
    "try:\n"
    "    kb = int(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1))\n"
    "except OSError:\n"
    "    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
    "kb += sum(worker_peaks_kb())\n"
    "print(f'@@ {rc} {wall:.4f} {kb}', file=sys.stderr)\n"
)


def run(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds of the command until its process could exit, peak RSS in MB) of one command in a fresh
    process."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD, *argv], env=env, capture_output=True, text=True, check=False
    )
    line = next((x for x in done.stderr.splitlines() if x.startswith("@@ ")), None)
    if line is None or line.split()[1] not in ("0", "1"):
        raise RuntimeError(f"{' '.join(argv)} failed: {done.stderr[-2000:]}")
    _, _, wall, rss_kb = line.split()
    return float(wall), int(rss_kb) / 1024


SMALL_EVENTS = 500_000  # `--small`: the x1 and x4 tilings of the default trace (68,692 events a copy)


def argv_for(command: tuple[str, ...], trace: str, scratch: Path) -> list[str]:
    argv = [*command, trace]
    if command == ("report",):
        argv += ["-o", str(scratch / "report.html")]
    elif command == ("history", "add"):
        (scratch / "history.db").unlink(missing_ok=True)
        argv += ["--db", str(scratch / "history.db")]
    elif command == ("diff",):
        argv += [trace]
    if command[0] != "report":
        argv += ["--format", "json"]
    return argv


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", default="v100", help="v100, owlv2 or the path of a Kineto trace")
    parser.add_argument("--copies", default="1,4,16", help="tiling factors, comma-separated (default 1,4,16)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per command; the fastest counts")
    parser.add_argument(
        "--first-runs",
        type=int,
        default=1,
        help="first runs per command (nothing kept beside the cache), the fastest counts (default 1)",
    )
    parser.add_argument(
        "--small",
        type=int,
        default=1,
        help=f"at least this many runs and first runs per command on traces under {SMALL_EVENTS:,} events (default 1)",
    )
    parser.add_argument("--only", default=None, help="comma-separated commands to run (default: all)")
    parser.add_argument("--markdown", action="store_true", help="print the tables as Markdown (README)")
    args = parser.parse_args(argv)
    args.source = TRACES / SOURCES[args.source] if args.source in SOURCES else Path(args.source)
    copies = [int(c) for c in args.copies.split(",")]
    wanted = None if args.only is None else set(args.only.split(","))
    commands = [c for c in COMMANDS if wanted is None or " ".join(c) in wanted or c == ("summary",)]
    results: dict[tuple[str, int], tuple[float, float]] = {}
    first: dict[tuple[str, int], float] = {}  # the first run of each command: nothing kept beside the cache
    cold: dict[int, tuple[float, float]] = {}
    events: dict[int, int] = {}
    with tempfile.TemporaryDirectory(prefix="opscope-bench-") as tmp:
        scratch = Path(tmp)
        env = {**os.environ, "OPSCOPE_CACHE_DIR": str(scratch / "cache"), "COLUMNS": "100"}
        for n in copies:
            tiled = make_big_trace(args.source, copies=n, distinct_steps=True, reuse=True)
            events[n] = tiled.events_per_copy * n
            small = args.small if events[n] < SMALL_EVENTS else 1
            first_runs, repeat = max(1, args.first_runs, small), max(1, args.repeat, small)
            # the cold summary parses and writes the cache: the fastest of --first-runs, each from no cache (the
            # first runs of the commands are the fastest of as many)
            for _ in range(first_runs):
                shutil.rmtree(scratch / "cache", ignore_errors=True)
                wall, rss = run(["summary", tiled.path, "--format", "json"], env)
                cold[n] = (min(cold[n][0], wall), max(cold[n][1], rss)) if n in cold else (wall, rss)
            for command in commands:
                # a first run reads only the trace cache: the results other commands keep beside it are
                # removed first, so it computes every analysis (the fastest of --first-runs such runs counts);
                # the next runs read back what the last one kept
                best = (float("inf"), 0.0)
                for _ in range(first_runs):
                    for kept in (scratch / "cache").glob("*.parquet.derived"):
                        shutil.rmtree(kept, ignore_errors=True)
                    wall, rss = run(argv_for(command, tiled.path, scratch), env)
                    key = (" ".join(command), n)
                    first[key] = min(first.get(key, float("inf")), wall)
                    best = (min(best[0], wall), max(best[1], rss))
                for _ in range(repeat - 1):
                    wall, rss = run(argv_for(command, tiled.path, scratch), env)
                    best = (min(best[0], wall), max(best[1], rss))
                results[(" ".join(command), n)] = best
                print(
                    f"  {' '.join(command):14s} x{n:<3d} {best[0]:7.2f} s {best[1]:7.0f} MB "
                    f"(first {first[(' '.join(command), n)]:.2f} s)",
                    file=sys.stderr,
                )
    print_tables(commands, copies, results, first, cold, events, args.markdown, args.source)
    return 0


TARGET_COPIES = 4  # the ~250 k-event trace of issue 25's interactive target (68,692 events a copy)


def print_tables(
    commands: list[tuple[str, ...]],
    copies: list[int],
    results: dict[tuple[str, int], tuple[float, float]],
    first: dict[tuple[str, int], float],
    cold: dict[int, tuple[float, float]],
    events: dict[int, int],
    markdown: bool,
    source: Path,
) -> None:
    big, small = copies[-1], copies[0]
    # issue 25's second target is stated at ~250 k events, the x4 trace: its ratio to the x4 warm summary
    mid = [n for n in copies if n == TARGET_COPIES and n != small]
    header = [
        "command",
        *(f"x{n} s" for n in copies),
        *(f"x{n} MB" for n in copies),
        f"x{small} / warm summary",
        *(f"x{n} / warm summary" for n in mid),
        *(f"x{n} first / warm summary" for n in mid),
        f"x{big} / cold summary",
        f"x{big} first / cold summary",
        f"RSS growth / trace growth x{small}->x{big}",
    ]
    rows = []
    for command in commands:
        name = " ".join(command)
        walls = [results[(name, n)][0] for n in copies]
        rss = [results[(name, n)][1] for n in copies]
        warm_ratio = walls[0] / results[("summary", small)][0]
        mid_ratios = [results[(name, n)][0] / results[("summary", n)][0] for n in mid]
        first_ratios = [first[(name, n)] / results[("summary", n)][0] for n in mid]
        cold_ratio = walls[-1] / cold[big][0]
        first_cold = first[(name, big)] / cold[big][0]
        growth = (rss[-1] / rss[0]) / (events[big] / events[small]) if len(copies) > 1 else 1.0
        rows.append(
            [
                name,
                *(f"{w:.2f}" for w in walls),
                *(f"{r:.0f}" for r in rss),
                f"{warm_ratio:.2f}x",
                *(f"{r:.2f}x" for r in mid_ratios),
                *(f"{r:.2f}x" for r in first_ratios),
                f"{cold_ratio:.2f}x",
                f"{first_cold:.2f}x",
                f"{growth:.2f}",
            ]
        )
    rows.append(
        [
            "cold summary",
            *(f"{cold[n][0]:.2f}" for n in copies),
            *(f"{cold[n][1]:.0f}" for n in copies),
            "",
            *("" for _ in mid),
            *("" for _ in mid),
            "1.00x",
            "",
            "",
        ]
    )
    print(
        f"trace: {source.name} x{'/x'.join(map(str, copies))} = {'/'.join(f'{events[n]:,}' for n in copies)} events; "
        f"{time.strftime('%Y-%m-%d')}"
    )
    if markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for row in rows:
            print("| " + " | ".join(row) + " |")
        return
    widths = [max(len(str(r[i])) for r in (header, *rows)) for i in range(len(header))]
    for row in (header, *rows):
        print("  ".join(str(c).rjust(w) for c, w in zip(row, widths, strict=True)))


if __name__ == "__main__":
    sys.exit(main())
