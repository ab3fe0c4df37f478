"""Benchmark `opscope summary` side by side with a decompression floor, a naive script, and HTA.

On a large tiled trace (bench/make_big_trace.py; ~1 GB uncompressed by default) each of these runs in its own
subprocess, so that wall time includes what a user waits for (interpreter start, imports) and peak RSS is that
run's alone (`os.wait4` returns the child's rusage; for a process tree it is the largest single process):

  (a) floor   streaming decompression of the same file with ISA-L's igzip, read in 4 MiB chunks, discarded
  (b) naive   gzip.open + json.loads + a loop summing `dur` per kernel name, as a user would write it
  (c) hta     HolisticTraceAnalysis (PyPI): TraceAnalysis(trace_dir) load + get_gpu_kernel_breakdown()
  (d) opscope `opscope summary FILE --format json --top 0`, cold (fresh OPSCOPE_CACHE_DIR) and then warm

It prints the table, the ratios and a PASS/FAIL line per target of issue 2 (the targets are meant for the
~1 GB trace; on small files interpreter start-up dominates), checks that opscope's kernel calls and total
equal the naive script's, and writes bench/out/summary_bench.json.

    python bench/bench_summary.py                      # ~1 GB; naive ~40 s / 5.6 GB RSS, HTA ~75 s / 7 GB
    python bench/bench_summary.py --size-mb 50 --markdown
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, cast

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
OUT_DIR = BENCH / "out"
SCHEMA = "opscope.bench.summary/1"
MB = 1e6
LABELS = {
    "floor": "(a) floor: ISA-L gzip read, discard",
    "naive": "(b) naive: gzip + json.loads + loop",
    "hta": "(c) HTA: load + get_gpu_kernel_breakdown",
    "cold": "(d) opscope summary, cold (no cache)",
    "warm": "(d) opscope summary, warm (cache)",
    "help": "(e) opscope --help",
    "polars": "(e) python -c 'import polars'",
}
# (name, ratio key, comparison, threshold, what it says): the targets of issue 10 (the native core)
TARGETS = (
    ("vs naive", "naive_over_cold", ">=", 20.0, ">= 20x faster than (b) naive"),
    ("vs HTA", "hta_over_cold", ">=", 40.0, ">= 40x faster than (c) HTA"),
    ("vs floor", "cold_over_floor", "<=", 6.0, "within 6x of (a) the decompression floor"),
    ("RSS", "opscope_peak_rss_mb", "<", 500.0, "peak RSS under 500 MB (cold and warm)"),
    ("warm", "naive_over_warm", ">=", 60.0, "warm run >= 60x faster than (b) naive"),
    ("start", "polars_over_help", ">", 1.0, "`opscope --help` faster than `import polars`"),
)


# ---- the measured workloads (run as `bench_summary.py --worker NAME PATH` in a fresh interpreter) ----


def work_floor(path: str) -> dict[str, Any]:
    from isal import igzip

    buffer = bytearray(4 << 20)
    total = 0
    with igzip.open(path, "rb") as reader:
        while count := reader.readinto(buffer):
            total += count
    return {"bytes": total}


def work_naive(path: str) -> dict[str, Any]:
    import gzip
    from collections import defaultdict

    with gzip.open(path) as handle:
        trace = json.loads(handle.read())
    totals: dict[str, float] = defaultdict(float)
    calls = 0
    for event in trace["traceEvents"]:
        if event.get("cat") == "kernel":
            totals[event["name"]] += event.get("dur", 0)
            calls += 1
    top = sorted(totals.items(), key=lambda item: -item[1])
    return {
        "kernel_calls": calls,
        "kernel_us": sum(totals.values()),
        "top_kernel": top[0][0] if top else None,
    }


def work_hta(path: str) -> dict[str, Any]:
    import logging

    logging.disable(logging.INFO)
    from hta.trace_analysis import TraceAnalysis

    # HTA loads every trace in a folder (rank from distributedInfo): give it a folder with just this file.
    with tempfile.TemporaryDirectory(prefix="bench-hta-") as folder:
        os.symlink(os.path.abspath(path), os.path.join(folder, os.path.basename(path)))
        analysis = TraceAnalysis(trace_dir=folder)
        by_type, by_kernel = analysis.get_gpu_kernel_breakdown(visualize=False)
    return {"gpu_us": float(by_type["sum"].sum()), "kernel_rows": len(by_kernel)}


WORKERS = {"floor": work_floor, "naive": work_naive, "hta": work_hta}


# ---- the harness ----


@dataclass
class Run:
    name: str
    label: str
    walls_s: list[float] = field(default_factory=list)
    peak_rss_mb: float = 0.0
    checks: dict[str, Any] = field(default_factory=dict)
    skipped: str | None = None

    @property
    def wall_s(self) -> float | None:
        return min(self.walls_s) if self.walls_s else None


def measure(command: list[str], env: dict[str, str], timeout_s: float) -> tuple[float, float, str]:
    """Run `command`; its wall time (s), peak RSS (MB) and standard output. Raises on failure."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        process = subprocess.Popen(command, stdout=out, stderr=err, env=env, cwd=REPO)
        timer = threading.Timer(timeout_s, process.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(process.pid, 0)
        finally:
            timer.cancel()
        wall = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if process.returncode != 0:
            tail = err.read().decode(errors="replace").strip().splitlines()[-3:]
            why = f"killed after {timeout_s:g} s" if wall >= timeout_s else f"exit code {process.returncode}"
            raise RuntimeError(" | ".join([why, *tail]))
        rss_bytes = usage.ru_maxrss * (1 if sys.platform == "darwin" else 1024)
        return wall, rss_bytes / MB, out.read().decode()


HELP_CODE = "import sys; from opscope.cli.main import main; sys.argv[1:] = ['--help']; main()"


def opscope_command(path: str) -> list[str]:
    code = "import sys; from opscope.cli.main import main; sys.exit(main(sys.argv[1:]))"
    return [sys.executable, "-c", code, "summary", path, "--format", "json", "--top", "0"]


def opscope_checks(output: str) -> dict[str, Any]:
    document = json.loads(output)
    kernels = [row for row in document["rows"] if row["kind"] == "kernel"]
    return {
        "kernel_calls": sum(row["calls"] for row in kernels),
        "kernel_us": sum(row["total_us"] for row in kernels),
        "gpu_us": document["totals"]["gpu_time_us"],
        "events": document["trace"]["events"],
    }


def run_all(path: str, args: argparse.Namespace) -> dict[str, Run]:
    runs = {name: Run(name, label) for name, label in LABELS.items()}
    # this checkout's opscope, whatever is installed
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")])),
    )
    if args.skip_naive:
        runs["naive"].skipped = "--skip-naive"
    if args.skip_hta:
        runs["hta"].skipped = "--skip-hta"
    elif _version("HolisticTraceAnalysis") is None:
        runs["hta"].skipped = "not installed (pip install holistictraceanalysis)"
    with open(path, "rb") as handle:  # untimed read so that no run pays for the first read from disk
        while handle.read(16 << 20):
            pass
    for repeat in range(args.repeat):
        with tempfile.TemporaryDirectory(prefix="bench-opscope-cache-") as cache:
            plan: list[tuple[str, list[str], dict[str, str]]] = [
                ("floor", _worker("floor", path), env),
                ("cold", opscope_command(path), dict(env, OPSCOPE_CACHE_DIR=cache)),
                ("warm", opscope_command(path), dict(env, OPSCOPE_CACHE_DIR=cache)),
                ("naive", _worker("naive", path), env),
                ("hta", _worker("hta", path), env),
                ("help", [sys.executable, "-c", HELP_CODE], env),
                ("polars", [sys.executable, "-c", "import polars"], env),
            ]
            for name, command, run_env in plan:
                run = runs[name]
                if run.skipped:
                    continue
                _progress(f"[{repeat + 1}/{args.repeat}] {run.label} ...")
                try:
                    wall, rss, output = measure(command, run_env, args.timeout)
                except RuntimeError as exc:  # a failed or timed-out run is reported, the others still run
                    run.skipped, run.walls_s = f"failed: {exc}", []
                    _progress(f" {run.skipped}\n")
                    continue
                run.walls_s.append(round(wall, 4))
                run.peak_rss_mb = max(run.peak_rss_mb, round(rss, 1))
                if name in ("cold", "warm"):
                    run.checks = opscope_checks(output)
                elif name in WORKERS:
                    run.checks = json.loads(output)
                _progress(f" {wall:.2f} s, {rss:.0f} MB\n")
    return runs


def _worker(name: str, path: str) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), "--worker", name, path]


def _progress(text: str) -> None:
    sys.stderr.write(text)
    sys.stderr.flush()


def ratios(runs: dict[str, Run]) -> dict[str, float | None]:
    def over(a: str, b: str) -> float | None:
        wa, wb = runs[a].wall_s, runs[b].wall_s
        return round(wa / wb, 2) if wa is not None and wb else None

    opscope_rss = [runs[name].peak_rss_mb for name in ("cold", "warm") if runs[name].walls_s]
    return {
        "naive_over_cold": over("naive", "cold"),
        "hta_over_cold": over("hta", "cold"),
        "cold_over_floor": over("cold", "floor"),
        "cold_over_warm": over("cold", "warm"),
        "naive_over_warm": over("naive", "warm"),
        "polars_over_help": over("polars", "help"),
        "opscope_peak_rss_mb": max(opscope_rss) if opscope_rss else None,
    }


def targets(values: dict[str, float | None]) -> list[dict[str, Any]]:
    checks = {
        ">=": lambda v, t: v >= t,
        "<=": lambda v, t: v <= t,
        "<": lambda v, t: v < t,
        ">": lambda v, t: v > t,
    }
    result = []
    for name, key, op, threshold, text in TARGETS:
        value = values[key]
        verdict = "SKIP" if value is None else "PASS" if checks[op](value, threshold) else "FAIL"
        result.append(
            {
                "target": name,
                "what": text,
                "ratio": key,
                "value": value,
                "op": op,
                "threshold": threshold,
                "verdict": verdict,
            }
        )
    return result


def consistency(runs: dict[str, Run]) -> list[str]:
    """opscope's kernel calls and total against the naive script's (an independent recomputation)."""
    lines = []
    naive, cold, warm = runs["naive"].checks, runs["cold"].checks, runs["warm"].checks
    for label, got in (("cold", cold), ("warm", warm)):
        if naive and got:
            same = got["kernel_calls"] == naive["kernel_calls"] and abs(
                got["kernel_us"] - naive["kernel_us"]
            ) <= 1e-6 * max(1.0, naive["kernel_us"])
            lines.append(
                f"opscope {label} kernels {got['kernel_calls']} calls / {got['kernel_us']:.3f} us vs naive "
                f"{naive['kernel_calls']} / {naive['kernel_us']:.3f}: {'OK' if same else 'MISMATCH'}"
            )
    if runs["hta"].checks and cold:
        lines.append(
            f"HTA GPU time {runs['hta'].checks['gpu_us']:.0f} us vs opscope {cold['gpu_us']:.0f} us "
            "(definitions differ; informational)"
        )
    return lines


def table(runs: dict[str, Run], markdown: bool) -> str:
    cold = runs["cold"].wall_s
    header = ("run", "wall s", "x opscope cold", "peak RSS MB")
    rows = []
    for run in runs.values():
        if run.wall_s is None:
            rows.append((run.label, f"skipped ({run.skipped})", "", ""))
            continue
        ratio = f"{run.wall_s / cold:.2f}" if cold else ""
        rows.append((run.label, f"{run.wall_s:.2f}", ratio, f"{run.peak_rss_mb:,.0f}"))
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|---|---:|---:|---:|"]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        return "\n".join(lines)
    widths = [max(len(str(r[i])) for r in (header, *rows)) for i in range(4)]

    def fmt(r: tuple[object, ...]) -> str:
        return "  ".join(
            str(c).ljust(w) if i == 0 else str(c).rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )

    return "\n".join([fmt(header), *(fmt(r) for r in rows)])


def target_table(verdicts: list[dict[str, Any]], markdown: bool) -> str:
    rows = [
        (v["what"], f"{v['ratio']} = " + ("-" if v["value"] is None else f"{v['value']:g}"), v["verdict"])
        for v in verdicts
    ]
    if markdown:
        return "\n".join(
            ["| target | measured | |", "|---|---|---|", *("| " + " | ".join(r) + " |" for r in rows)]
        )
    return "\n".join(f"  {verdict:4}  {what:42} {value}" for what, value, verdict in rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worker", choices=sorted(WORKERS), help=argparse.SUPPRESS)
    parser.add_argument("trace", nargs="?", default=None, help="benchmark this file instead of building one")
    parser.add_argument("--size-mb", type=float, default=1000, help="size of the tiled trace (default 1000)")
    parser.add_argument(
        "--source", type=Path, default=None, help="real trace to tile (default: make_big_trace's)"
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs of each; the best wall time is kept")
    parser.add_argument("--skip-naive", action="store_true", help="skip (b), ~40 s and 5.6 GB RSS at 1 GB")
    parser.add_argument("--skip-hta", action="store_true", help="skip (c), ~75 s and 7 GB RSS at 1 GB")
    parser.add_argument(
        "--markdown", action="store_true", help="print the table as Markdown (for the README)"
    )
    parser.add_argument("--timeout", type=float, default=1800, help="seconds allowed per run (default 1800)")
    parser.add_argument("--json-out", type=Path, default=OUT_DIR / "summary_bench.json", help="results file")
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(WORKERS[args.worker](args.trace)))
        return 0
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    if args.trace:
        path, built = args.trace, cast("dict[str, Any]", {})
    else:
        # In a subprocess: a child's peak RSS starts at its parent's (fork/vfork + exec), so the harness itself
        # must stay small and never hold the source trace.
        _progress(f"building the tiled trace (~{args.size_mb:g} MB) ...")
        command = [
            sys.executable,
            str(BENCH / "make_big_trace.py"),
            "--size-mb",
            str(args.size_mb),
            "--reuse",
            "--json",
        ] + (["--source", str(args.source)] if args.source else [])
        built = json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)
        path = built["path"]
        _progress(f" {path}\n")
    runs = run_all(path, args)
    values = ratios(runs)
    verdicts = targets(values)
    notes = consistency(runs)
    size = os.path.getsize(path)
    info = (
        f"trace: {os.path.relpath(path, REPO)} ({size / MB:,.0f} MB gzip"
        + (
            f", {built['uncompressed_bytes'] / MB:,.0f} MB JSON, {built['copies']} copies x "
            f"{built['events_per_copy']:,} events of {Path(built['source']).name}"
            if built
            else ""
        )
        + ")"
    )
    machine = {
        "cpus": os.cpu_count(),
        "load_1min": round(os.getloadavg()[0], 2),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "isal": _version("isal"),
        "hta": _version("HolisticTraceAnalysis"),
        "opscope_src": str(REPO / "src"),
        "harness_peak_rss_mb": round(_self_rss_mb(), 1),
    }
    print(info)
    print(
        f"machine: {machine['cpus']} CPUs, load {machine['load_1min']} at the end, Python {machine['python']}, "
        f"HTA {machine['hta']}; best of {args.repeat}\n"
    )
    print(table(runs, args.markdown))
    print("\nratios and targets (targets are for the ~1 GB trace):\n")
    print(target_table(verdicts, args.markdown))
    for line in notes:
        print(f"  check: {line}")
    args.json_out.parent.mkdir(parents=True, exist_ok=True)
    result = {
        "schema": SCHEMA,
        "trace": {"path": path, "gzip_bytes": size, **built},
        "machine": machine,
        "repeat": args.repeat,
        "runs": [{**asdict(run), "wall_s": run.wall_s} for run in runs.values()],
        "ratios": values,
        "targets": verdicts,
        "checks": notes,
    }
    args.json_out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nwrote {args.json_out}")
    failed = any(run.skipped and run.skipped.startswith("failed") for run in runs.values())
    return 1 if failed or any("MISMATCH" in line for line in notes) else 0


def _self_rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * (1 if sys.platform == "darwin" else 1024) / MB


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


if __name__ == "__main__":
    sys.exit(main())
