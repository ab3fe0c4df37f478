"""Benchmark: the peak memory of `opscope summary` on millions of tiny events (issue 32, item 6).

The input is hand-made: a Kineto JSON document of N minimal kernel events (`ph`, `cat`, `name`, `pid`, `tid`,
`ts`, `dur` and a device; 8 names by default, one per event with `--distinct-names`), the smallest event the
reader keeps, so the table holds as many rows per byte of JSON as a trace can. Each run is a fresh process
(bench_analyses.CHILD: the kernel's peak RSS of that process alone); `summary` runs cold (parse and cache
write) and warm (the cache), and the trivial one-event trace gives the floor (interpreter, libraries, reader
threads) that every run pays.

    python bench/bench_memory.py                       # 3,950,000 events, the issue's case; bound 500 MB
    python bench/bench_memory.py --events 1000000 --distinct-names

The trace is written to the system's temporary folder and removed afterwards. Exits 1 when a peak is above
--bound-mb (default 500).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_analyses import CHILD

ISSUE_EVENTS = 3_950_000
EVENT = '{"ph":"X","cat":"kernel","name":"k%d","pid":0,"tid":7,"ts":%d,"dur":1,"args":{"device":0}}'


def write_tiny_events(path: Path, events: int, names: int = 8) -> Path:
    """`events` minimal kernel events, 2 us apart, named `k0`..`k<names-1>` in turn (`names=0`: every name
    distinct), written in blocks so that memory stays small whatever `events` is."""
    with open(path, "w", encoding="ascii") as out:
        out.write('{"traceEvents":[\n')
        for start in range(0, events, 100_000):
            stop = min(start + 100_000, events)
            out.write(",\n".join(EVENT % (i % names if names else i, 2 * i) for i in range(start, stop)))
            out.write(",\n" if stop < events else "\n")
        out.write("]}\n")
    return path


def peak_mb(argv: list[str], cache: Path) -> tuple[float, float]:
    """(wall seconds, peak RSS in MB) of `opscope ARGV --format json -o /dev/null` in a fresh process."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD, *argv, "--format", "json", "-o", os.devnull],
        env={**os.environ, "OPSCOPE_CACHE_DIR": str(cache)},
        capture_output=True,
        text=True,
        check=False,
    )
    line = next((x for x in done.stderr.splitlines() if x.startswith("@@ ")), "")
    if line.split()[1:2] != ["0"]:
        raise RuntimeError(f"{' '.join(argv)} failed: {done.stderr[-2000:]}")
    _, _, wall, kb = line.split()
    return float(wall), int(kb) / 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--events", type=int, default=ISSUE_EVENTS, help="events in the trace (default 3.95 M)"
    )
    parser.add_argument("--distinct-names", action="store_true", help="every event a name of its own")
    parser.add_argument("--bound-mb", type=float, default=500.0, help="the largest peak that passes")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="opscope-bench-memory-") as tmp:
        folder = Path(tmp)
        started = time.perf_counter()
        big = write_tiny_events(folder / "tiny.json", args.events, 0 if args.distinct_names else 8)
        small = write_tiny_events(folder / "one.json", 1)
        print(
            f"trace: {args.events:,} tiny kernel events, {big.stat().st_size / 1e6:.0f} MB of JSON "
            f"(written in {time.perf_counter() - started:.1f} s); {time.strftime('%Y-%m-%d')}"
        )
        rows = []
        for label, path in (("one event", small), (f"{args.events:,} events", big)):
            cache = folder / f"cache-{path.stem}"
            for run in ("cold", "warm"):
                wall, peak = peak_mb(["summary", str(path)], cache)
                rows.append((label, run, wall, peak))
        failed = False
        for label, run, wall, peak in rows:
            verdict = ""
            if label != "one event":
                failed |= peak > args.bound_mb
                verdict = "PASS" if peak <= args.bound_mb else "FAIL"
            print(f"  summary {label:>18s} {run}  {wall:7.2f} s  {peak:6.0f} MB  {verdict}")
    print(f"bound: {args.bound_mb:.0f} MB peak RSS")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
