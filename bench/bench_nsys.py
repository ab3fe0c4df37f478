"""Benchmark: `opscope summary` on a large Nsight Systems SQLite export vs the same GROUP BY run in sqlite3.

Tiles one real nsys export (default: ../shared/traces/pipit/cloverleaf-...sqlite) to about --size-mb MB by
copying it and repeating `INSERT ... SELECT` on the CUDA activity tables that opscope reads (kernels,
memcpy, memset, runtime, NVTX) with timestamps shifted past the end of the previous copy and correlation ids
shifted past the largest id, so every copy is a distinct, non-overlapping repetition of the original run.
Then it times, side by side:

  (a) the floor: the per-kernel `GROUP BY` (count, sum, avg, min, max over kernels joined to their names)
      run directly in sqlite3, as `nsys stats --report cuda_gpu_kern_sum` would minus its Python median;
  (b) `opscope summary --no-cache` (cold: read every event into the event model, then summarise);
      each timing is the best of two runs, so both sides read from the OS page cache;
  (c) `opscope summary` warm (the Parquet cache written by a cold run).

and prints the size, the times and the ratios b/a and c/a. Usage:

  python bench/bench_nsys.py --size-mb 1024          # the 1 GB run (a few minutes; run it once)
  python bench/bench_nsys.py --size-mb 20            # a quick check
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

from _timing import best_of  # bench/_timing.py; bench scripts run with bench/ on sys.path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SOURCE = (
    REPO.parent / "shared" / "traces" / "pipit" / "cloverleaf-nsys__perlmutter-cloverleaf-cuda.sqlite"
)
TILED_TABLES = (
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "NVTX_EVENTS",
)

GROUP_BY = """
SELECT s.value, count(*), sum(k.end - k.start), avg(k.end - k.start), min(k.end - k.start), max(k.end - k.start)
FROM CUPTI_ACTIVITY_KIND_KERNEL AS k JOIN StringIds AS s ON s.id = k.demangledName
GROUP BY k.demangledName ORDER BY 3 DESC
"""


def _db_bytes(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA page_count").fetchone()[0]) * int(
        conn.execute("PRAGMA page_size").fetchone()[0]
    )


def tile(source: Path, target: Path, size_mb: float | None = None, copies_wanted: int | None = None) -> int:
    """Copy `source` to `target` and repeat its activity rows until the file reaches `size_mb`, or
    `copies_wanted` copies in all (the scale tests: x4); returns copies."""
    shutil.copyfile(source, target)
    conn = sqlite3.connect(target)
    tables = [
        t for (t,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'") if t in TILED_TABLES
    ]
    originals = {t: int(conn.execute(f"SELECT max(rowid) FROM {t}").fetchone()[0] or 0) for t in tables}
    lo = min(int(conn.execute(f"SELECT min(start) FROM {t}").fetchone()[0] or 0) for t in tables)
    hi = max(
        int(conn.execute(f"SELECT max(coalesce(end, start)) FROM {t}").fetchone()[0] or 0) for t in tables
    )
    span = hi - lo + 1_000
    max_corr = (
        max(
            (
                int(conn.execute(f"SELECT max(correlationId) FROM {t}").fetchone()[0] or 0)
                for t in tables
                if t != "NVTX_EVENTS"
            ),
            default=0,
        )
        + 1
    )
    columns = {t: [row[1] for row in conn.execute(f"PRAGMA table_info({t})")] for t in tables}
    target_bytes = int((size_mb or 0) * (1 << 20))
    copies = 1
    conn.execute("PRAGMA journal_mode=OFF")
    conn.execute("PRAGMA synchronous=OFF")
    while (copies < copies_wanted) if copies_wanted is not None else (_db_bytes(conn) < target_bytes):
        shift, corr_shift = copies * span, copies * max_corr
        for table in tables:
            exprs = []
            for col in columns[table]:
                if col in ("start", "end"):
                    exprs.append(f"{col} + {shift}")
                elif col == "correlationId":
                    exprs.append(f"{col} + {corr_shift}")
                else:
                    exprs.append(col)
            names = ", ".join(f'"{c}"' for c in columns[table])
            conn.execute(
                f"INSERT INTO {table} ({names}) SELECT {', '.join(exprs)} FROM {table} "
                f"WHERE rowid <= {originals[table]}"
            )
        conn.commit()
        copies += 1
    conn.close()
    return copies


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=float, default=1024.0, help="size of the tiled file (default 1024)")
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="the nsys SQLite export to tile")
    parser.add_argument(
        "--workdir", type=Path, default=None, help="where to write the tiled file (default: a temp dir)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the tiled file afterwards")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO / "src"))
    from opscope.cli.main import main as opscope_main

    workdir = Path(tempfile.mkdtemp(prefix="opscope-bench-nsys-", dir=args.workdir))
    os.environ["OPSCOPE_CACHE_DIR"] = str(workdir / "cache")
    tiled = workdir / "tiled.sqlite"
    try:
        start = time.perf_counter()
        copies = tile(args.source, tiled, args.size_mb)
        size = tiled.stat().st_size
        conn = sqlite3.connect(f"file:{tiled}?mode=ro", uri=True)
        kernels = conn.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
        rows = sum(
            conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
            for (t,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall()
            if t in TILED_TABLES
        )
        conn.close()
        print(
            f"tiled {args.source.name} x{copies} -> {size / 1e6:,.0f} MB, {rows:,} activity rows "
            f"({kernels:,} kernels) in {time.perf_counter() - start:.1f} s"
        )

        def floor() -> None:
            with sqlite3.connect(f"file:{tiled}?mode=ro", uri=True) as db:
                db.execute(GROUP_BY).fetchall()

        devnull = open(os.devnull, "w")  # noqa: SIM115

        def summary(*extra: str) -> None:
            saved = sys.stdout
            sys.stdout = devnull
            try:
                code = opscope_main(["-q", "summary", str(tiled), "--top", "0", "--format", "json", *extra])
            finally:
                sys.stdout = saved
            if code != 0:
                raise SystemExit(f"opscope summary failed with exit code {code}")

        t_floor = best_of(floor, repeat=2)
        t_cold = best_of(lambda: summary("--no-cache"), repeat=2)
        summary()  # writes the cache
        t_warm = best_of(summary, repeat=2)
        print(f"(a) sqlite3 GROUP BY          {t_floor:8.2f} s")
        print(
            f"(b) opscope summary, cold     {t_cold:8.2f} s   ratio b/a = {t_cold / t_floor:5.2f}x  (target <= 3x)"
        )
        print(f"(c) opscope summary, warm     {t_warm:8.2f} s   ratio c/a = {t_warm / t_floor:5.2f}x")
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            print(f"kept {tiled}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
