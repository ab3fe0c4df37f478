"""Benchmark of `opscope ranks` over many traces: one process vs local worker processes vs a Dask cluster, and
peak memory as the number of traces grows.

Traces are tiled copies of the 8 DLRM rank files (../shared/traces/param/dlrm_kineto; 0.9 MB each) in a
temporary folder, each copy given its own rank and the tiled world size; then 8 copies of a larger (15 MB)
trace, where the per-trace work outweighs starting worker processes. Every run is a fresh `opscope ranks DIR --no-cache`
command (parsing included, the Python start-up too); memory is the peak of the summed RSS of the command and
all its child processes, sampled every 20 ms. The Dask cluster (scheduler + as many single-threaded workers as
cores, on 127.0.0.1) is started before timing and warmed with one run, as a long-lived cluster would be.

    python bench/bench_ranks.py                           # 8, 16, 64 DLRM ranks, 8 larger traces (~3 min, 2 cores)
    python bench/bench_ranks.py --traces 2,4 --no-large   # quick check of the script itself
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
TRACES = Path(os.environ.get("OPSCOPE_TRACES", REPO.parent / "shared" / "traces"))
DLRM = TRACES / "param" / "dlrm_kineto"
LARGE = TRACES / "hta" / "ns_resolution_trace_rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "src"), str(REPO / "bench")]))


def burn(n: int) -> int:
    total = 0
    for i in range(n):
        total += i * i
    return total


def calibrate(cores: int) -> float:
    """Speed-up of pure-Python work in `cores` processes over one, right now: what the machine can give (less
    than `cores` when other jobs share it). Uses the same executor as opscope."""
    sys.path.insert(0, str(REPO / "src"))
    from opscope.scale.executor import run_all

    items = [2_000_000] * (4 * cores)
    started = time.perf_counter()
    run_all(burn, items, jobs=1)
    serial = time.perf_counter() - started
    run_all(burn, items[:cores], jobs=cores, mode="processes")  # start the worker processes
    started = time.perf_counter()
    run_all(burn, items, jobs=cores, mode="processes")  # processes: threads would measure the GIL
    return serial / (time.perf_counter() - started)


def tile(folder: Path, count: int, sources: list[Path] | None = None) -> Path:
    """`count` rank files in a new subfolder of `folder`: copies of `sources` (default: the 8 DLRM ranks) with
    ranks 0..count-1 and world size `count`."""
    files = sources or sorted(DLRM.glob("*.json"))
    out = Path(tempfile.mkdtemp(prefix=f"{count}-", dir=folder))
    for rank in range(count):
        data = files[rank % len(files)].read_bytes()
        doc = json.loads(gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)
        doc["distributedInfo"] = dict(doc.get("distributedInfo", {}), rank=rank, world_size=count)
        (out / f"rank{rank}.json").write_text(json.dumps(doc))
    return out


def measure(args: list[str], env: dict[str, str] | None = None) -> tuple[float, int, str]:
    """Wall seconds, peak summed RSS (bytes) of the process tree, and stdout of `opscope ARGS`."""
    output = Path(tempfile.mkstemp(prefix="opscope-bench-", suffix=".out")[1])
    command = [
        sys.executable,
        "-c",
        "import sys; from opscope.cli.main import main; sys.exit(main(sys.argv[1:]))",
        *args,
        "-o",
        str(output),
    ]
    # stdout/stderr to files: a full pipe would block the command while this loop samples memory
    with tempfile.TemporaryFile() as errors:
        started = time.perf_counter()
        proc = psutil.Popen(command, env=dict(ENV, **(env or {})), stdout=subprocess.DEVNULL, stderr=errors)
        peak = 0
        while proc.poll() is None:
            try:
                tree = [proc, *proc.children(recursive=True)]
                peak = max(peak, sum(p.memory_info().rss for p in tree if p.is_running()))
            except psutil.Error:
                pass
            time.sleep(0.02)
        elapsed = time.perf_counter() - started
        errors.seek(0)
        err = errors.read().decode()
    out = output.read_text() if output.exists() else ""
    output.unlink(missing_ok=True)
    if proc.returncode != 0:
        raise SystemExit(f"opscope {' '.join(args)} failed: {err.strip()}")
    return elapsed, peak, out


def start_cluster(workers: int) -> tuple[str, list[subprocess.Popen[bytes]]]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    dask = str(Path(sys.executable).parent / "dask")
    address = f"tcp://127.0.0.1:{port}"
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "env": ENV}
    procs = [
        subprocess.Popen(
            [dask, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"], **quiet
        )
    ]  # type: ignore[call-overload]
    procs += [
        subprocess.Popen(
            [
                dask,
                "worker",
                address,
                "--nworkers",
                "1",
                "--nthreads",
                "1",
                "--no-dashboard",
                "--host",
                "127.0.0.1",
            ],
            **quiet,
        )
        for _ in range(workers)
    ]  # type: ignore[call-overload]
    from distributed import Client

    deadline = time.monotonic() + 60
    while True:
        try:
            with Client(address, timeout="5s") as client:
                client.wait_for_workers(workers, timeout=60)
            return address, procs
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def best(args: list[str], repeat: int, env: dict[str, str] | None = None) -> tuple[float, int, str]:
    """The fastest of `repeat` runs (the least disturbed by other jobs on a shared machine), with the highest
    memory peak seen."""
    runs = [measure(args, env) for _ in range(repeat)]
    fastest = min(runs, key=lambda r: r[0])
    return fastest[0], max(r[1] for r in runs), fastest[2]


def run_case(tiled: Path, cores: int, address: str | None, repeat: int) -> dict[str, tuple[float, int]]:
    common = ["ranks", str(tiled), "--no-cache", "--format", "json", "--top", "0"]
    serial = best([*common, "--jobs", "1"], repeat)
    parallel = best([*common, "--jobs", str(cores)], repeat, {"OPSCOPE_PARALLEL": "threads"})
    processes = best([*common, "--jobs", str(cores)], repeat, {"OPSCOPE_PARALLEL": "processes"})
    assert json.loads(serial[2]) == json.loads(parallel[2]) == json.loads(processes[2]), (
        "parallel result differs"
    )
    row = {"serial": serial[:2], "parallel": parallel[:2], "processes": processes[:2]}
    if address:
        measure([*common, "--scheduler", address])  # warm the workers (imports)
        dask = best([*common, "--scheduler", address], repeat)
        assert json.loads(dask[2]) == json.loads(parallel[2]), "Dask result differs"
        row["dask"] = dask[:2]
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--traces",
        default="8,16,64",
        help="trace counts, comma-separated (default 8,16,64); memory compares the last two",
    )
    parser.add_argument("--no-dask", action="store_true", help="skip the Dask comparison")
    parser.add_argument("--repeat", type=int, default=2, help="runs per configuration; the fastest counts")
    parser.add_argument("--no-large", dest="large", action="store_false", help="skip the 8 larger traces")
    options = parser.parse_args()
    counts = [int(c) for c in options.traces.split(",")]
    cores = len(os.sched_getaffinity(0))
    folder = Path(tempfile.mkdtemp(prefix="opscope-bench-ranks-"))
    cluster: list[subprocess.Popen[bytes]] = []
    try:
        address = None
        if not options.no_dask:
            address, cluster = start_cluster(cores)
        cases = [(f"{count} DLRM ranks (0.9 MB each)", count, None) for count in counts]
        if options.large:
            cases.append((f"8 x {LARGE.name[:24]}… (15 MB each)", 8, [LARGE]))
        results = {}
        for label, count, sources in cases:
            row = run_case(tile(folder, count, sources), cores, address, options.repeat)
            results[label] = row
            mb = {k: v[1] / 2**20 for k, v in row.items()}
            print(
                f"{label}: one thread {row['serial'][0]:6.2f} s ({mb['serial']:.0f} MiB), "
                f"{cores} threads {row['parallel'][0]:6.2f} s ({mb['parallel']:.0f} MiB), "
                f"{cores} processes {row['processes'][0]:6.2f} s ({mb['processes']:.0f} MiB)"
                + (f", Dask {row['dask'][0]:6.2f} s" if "dask" in row else "")
            )
        print(
            f"cores: {cores}; pure-Python speed-up available right now (machine load): {calibrate(cores):.2f}x "
            f"(load average {os.getloadavg()[0]:.1f})"
        )
        for label, row in results.items():
            print(
                f"speed-up, {label}, {cores} threads vs one: {row['serial'][0] / row['parallel'][0]:.2f}x; "
                f"{cores} processes vs one: {row['serial'][0] / row['processes'][0]:.2f}x"
            )
            if "dask" in row:
                print(f"Dask / local parallel time, {label}: {row['dask'][0] / row['parallel'][0]:.2f}x")
        # The last two counts: with few small traces this process finishes before the workers have taken any.
        first, last = results[cases[max(len(counts) - 2, 0)][0]], results[cases[len(counts) - 1][0]]
        print(
            f"peak memory, {counts[-1]} vs {counts[max(len(counts) - 2, 0)]} DLRM ranks (parallel, whole process tree): "
            f"{last['parallel'][1] / first['parallel'][1]:.2f}x "
            f"(one process: {last['serial'][1] / first['serial'][1]:.2f}x)"
        )
    finally:
        for proc in reversed(cluster):
            proc.terminate()
            proc.wait(timeout=30)
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
