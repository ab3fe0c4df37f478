"""Benchmark: `opscope analyze` against `opscope summary` on the same (tiled) trace, printed as ratios.

A corpus trace is tiled N times in time (each copy shifted past the previous one, with correlation, flow and
external ids offset so links stay within their copy) and written as plain Kineto JSON. Then, in this process:

- cold: `summary --no-cache` and `analyze --no-cache` (parse + analysis), the "same run" comparison of the
  issue (target: analyze <= 2x summary);
- warm: both commands from the Parquet cache (analysis cost dominates here; reported for information).

Usage: python bench/bench_analyze.py [--trace PATH] [--target-mb 200] [--repeat 1]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import tempfile
from pathlib import Path

from _timing import best_of  # bench/_timing.py; bench scripts run with bench/ on sys.path

DEFAULT = (
    Path(__file__).resolve().parents[2]
    / "shared"
    / "traces"
    / "hta"
    / "ns_resolution_trace_rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
)
ID_KEYS = ("correlation", "External id", "external id")


def _tile(source: Path, target_mb: float, out: Path) -> tuple[int, int]:
    opener = gzip.open if source.name.endswith(".gz") else open
    with opener(source, "rb") as handle:
        doc = json.loads(handle.read())
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    timed = [e for e in events if isinstance(e.get("ts"), (int, float))]
    lo = min(e["ts"] for e in timed)
    hi = max(e["ts"] + (e.get("dur") or 0) for e in timed if isinstance(e.get("dur", 0), (int, float)))
    period = (hi - lo) * 1.01 + 1
    ids = [e.get("id") for e in events if isinstance(e.get("id"), int)] + [
        e["args"][k]
        for e in events
        if isinstance(e.get("args"), dict)
        for k in ID_KEYS
        if isinstance(e["args"].get(k), int)
    ]
    id_step = (max(ids) + 1) if ids else 0
    one = len(json.dumps(events))
    copies = max(1, int(target_mb * 1e6 / one))
    with open(out, "w") as f:
        f.write('{"schemaVersion": 1, "traceEvents": [')
        first = True
        for k in range(copies):
            for e in events:
                if k and e.get("ph") == "M":
                    continue
                c = dict(e)
                if isinstance(c.get("ts"), (int, float)):
                    c["ts"] = c["ts"] + k * period
                if isinstance(c.get("id"), int):
                    c["id"] = c["id"] + k * id_step
                if isinstance(c.get("args"), dict):
                    c["args"] = dict(c["args"])
                    for key in ID_KEYS:
                        if isinstance(c["args"].get(key), int):
                            c["args"][key] += k * id_step
                f.write(("" if first else ",") + json.dumps(c))
                first = False
        f.write("]}")
    return copies, out.stat().st_size


def _time(argv: list[str], repeat: int) -> float:
    from opscope.cli.main import main

    def once() -> None:
        code = main(argv)
        if code != 0:
            raise SystemExit(f"opscope {' '.join(argv)} failed with {code}")

    return best_of(once, repeat)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, default=DEFAULT)
    parser.add_argument("--target-mb", type=float, default=200.0)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["OPSCOPE_CACHE_DIR"] = str(Path(tmp) / "cache")
        path = Path(tmp) / "tiled.json"
        copies, size = _tile(args.trace, args.target_mb, path)
        print(f"trace: {args.trace.name} x {copies} = {size / 1e6:,.0f} MB")
        out = ["--format", "json", "-o", os.devnull]
        cold_s = _time(["summary", str(path), "--no-cache", *out], args.repeat)
        cold_a = _time(["analyze", str(path), "--no-cache", *out], args.repeat)
        _time(["summary", str(path), *out], 1)  # fill the cache
        warm_s = _time(["summary", str(path), *out], args.repeat)
        warm_a = _time(["analyze", str(path), *out], args.repeat)
    print(
        f"cold (parse + analysis): summary {cold_s:.2f}s  analyze {cold_a:.2f}s  ratio {cold_a / cold_s:.2f}x "
        f"(target <= 2x)"
    )
    print(
        f"warm (from cache):       summary {warm_s:.2f}s  analyze {warm_a:.2f}s  ratio {warm_a / warm_s:.2f}x"
    )


if __name__ == "__main__":
    sys.exit(main())
