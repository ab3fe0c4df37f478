"""JAX / XLA `.xplane.pb` reader: the three real MI300X files of the corpus checked against an independent decoder
(jaxlib's `jax.profiler.ProfileData`, XLA's own C++ XSpace code), HLO attribution through ops / tree, the JAX
profile-folder layout, hand-made XSpace messages for GPU-plane fields the real files lack, damaged input."""

from __future__ import annotations

import gzip
import json
import random
import zlib
from collections import Counter, defaultdict
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import corpus_path
from opscope.errors import InputError
from opscope.ingest.loader import load
from opscope.ingest.registry import detect
from opscope.model.schema import Col, Kind

FILES = [
    "tracelens/mi300__jax08_attention__tw003.xplane.pb",
    "tracelens/mi300__jax08_gemm__tw003.xplane.pb",
    "tracelens/mi300__jax_conv_minimal_legacy__chi-mi300x-013.ord.vultr.cpe.ice.amd.com.xplane.pb",
]
GPU = (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET)


def _profile(path: Path):  # type: ignore[no-untyped-def]
    profiler = pytest.importorskip("jax.profiler")
    return profiler.ProfileData.from_file(str(path))


def _reference(path: Path) -> dict[str, object]:
    """Device activity and host launches as jaxlib decodes them (times in ns: start_ns / duration_ns)."""
    gpu: list[dict[str, object]] = []
    launches: dict[int, dict[str, object]] = {}
    host_events = 0
    for plane in _profile(path).planes:
        for line in plane.lines:
            for event in line.events:
                stats = dict(event.stats)
                if plane.name.startswith("/device:") and line.name.startswith("Stream #"):
                    gpu.append(
                        {
                            "name": event.name,
                            "dur": round(event.duration_ns),
                            "start": event.start_ns,
                            "device": int(plane.name.rsplit(":", 1)[1]),
                            "stream": int(line.name.split("#")[1].split("(")[0]),
                            "correlation": stats.get("correlation_id"),
                            "stats": stats,
                        }
                    )
                elif not plane.name.startswith("/device:"):
                    host_events += 1
                    if "correlation_id" in stats:
                        launches[int(stats["correlation_id"])] = stats
    return {"gpu": gpu, "launches": launches, "host_events": host_events}


@pytest.mark.corpus
@pytest.mark.parametrize("relative", FILES)
def test_detected_by_content(relative: str) -> None:
    path = corpus_path(relative)
    assert detect(path, str(path)).name == "xplane"


def test_formats_lists_xplane(cli) -> None:  # type: ignore[no-untyped-def]
    result = cli("formats", "--format", "json")
    assert result.code == 0
    assert "xplane" in result.out


@pytest.mark.corpus
@pytest.mark.parametrize("relative", FILES)
def test_gpu_events_match_jaxlib(relative: str) -> None:
    """Per-kernel calls and total ns, streams, devices and start times equal what jaxlib decodes."""
    path = corpus_path(relative)
    ref = _reference(path)
    trace = load(path, cache=False)
    events = trace.events
    gpu = events.filter(pl.col(Col.KIND).cast(pl.String).is_in(GPU))
    want: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for e in ref["gpu"]:  # type: ignore[attr-defined]
        want[e["name"]][0] += 1
        want[e["name"]][1] += e["dur"]
    got = {
        name: [calls, total]
        for name, calls, total in gpu.group_by(pl.col(Col.NAME).cast(pl.String))
        .agg(pl.len(), pl.col(Col.DUR_NS).sum())
        .iter_rows()
    }
    assert got == dict(want)
    assert sorted(zip(gpu[Col.DEVICE].to_list(), gpu[Col.STREAM].to_list())) == sorted(
        (e["device"], e["stream"]) for e in ref["gpu"]
    )  # type: ignore[attr-defined]
    assert sorted(gpu[Col.TS_NS].to_list()) == sorted(int(e["start"]) for e in ref["gpu"])  # type: ignore[attr-defined]
    assert sorted(gpu[Col.CORRELATION].to_list()) == sorted(e["correlation"] for e in ref["gpu"])  # type: ignore[attr-defined]
    host = events.filter(
        ~pl.col(Col.PID).cast(pl.String).str.starts_with("/device:")
        & ~pl.col(Col.CAT).cast(pl.String).is_in(["xla_op", "xla_module", "xla_name_stack"])
    )
    assert host.height == ref["host_events"]


@pytest.mark.corpus
@pytest.mark.parametrize("relative", FILES)
def test_hlo_totals_match_jaxlib(relative: str) -> None:
    """GPU ns per (HLO module, HLO op) from the columns equal the sums over jaxlib's device events."""
    path = corpus_path(relative)
    want: Counter[tuple[str | None, str | None]] = Counter()
    for plane in _profile(path).planes:
        if plane.name.startswith("/device:"):
            for line in plane.lines:
                for event in line.events:
                    stats = dict(event.stats)
                    want[(stats.get("hlo_module"), stats.get("hlo_op"))] += round(event.duration_ns)
    gpu = load(path, cache=False).events.filter(pl.col(Col.KIND).cast(pl.String).is_in(GPU))
    got = {
        (m, o): t
        for m, o, t in gpu.group_by(
            pl.col(Col.HLO_MODULE).cast(pl.String), pl.col(Col.HLO_OP).cast(pl.String)
        )
        .agg(pl.col(Col.DUR_NS).sum())
        .iter_rows()
    }
    assert got == dict(want)
    assert any(m is not None for m, _ in got)


@pytest.mark.corpus
def test_launch_config_and_devices() -> None:
    path = corpus_path(FILES[0])
    trace = load(path, cache=False)
    assert [d.id for d in trace.meta.devices] == list(range(8))
    dev = trace.meta.devices[0]
    # ROCm's compute_cap 9.4 is the gfx version, not a CUDA compute capability: not given to the NVIDIA tables
    assert (dev.name, dev.sm_count, dev.total_memory, dev.compute_capability) == (
        "AMD GPU",
        304,
        206141652992,
        None,
    )
    assert trace.meta.extra["xplane_gfx_version"] == "9.4"
    assert trace.meta.format == "xplane" and trace.meta.trace_name == "tw003"
    kernels = trace.events.filter(pl.col(Col.KIND).cast(pl.String) == Kind.KERNEL)
    # hand-checked against the file: ' grid:4,64,1 block:256,1,1 private_mem:0 group_mem:8704 occ_pct:0'
    row = kernels.filter(pl.col(Col.CORRELATION) == 6).row(0, named=True)
    assert (row[Col.GRID_X], row[Col.GRID_Y], row[Col.GRID_Z]) == (4, 64, 1)
    assert (row[Col.BLOCK_X], row[Col.SHARED_MEMORY], row[Col.OCCUPANCY_PCT]) == (256, 8704, None)
    assert (row[Col.HLO_OP], row[Col.HLO_MODULE], row[Col.PROGRAM_ID]) == ("custom-call.1", "jit_matmul", 19)
    assert row[Col.NAME_STACK] == "jit(matmul)/dot_general"


@pytest.mark.corpus
@pytest.mark.parametrize("relative", FILES)
def test_device_properties_match_jaxlib(relative: str) -> None:
    """Issue 16: device planes' clock rate (kHz) and memory bandwidth (bytes/s) are kept with the other
    properties; jaxlib's decoder of the same plane stats is the reference."""
    path = corpus_path(relative)
    want = {
        int(p.name.rsplit(":", 1)[1]): dict(p.stats)
        for p in _profile(path).planes
        if p.name.startswith("/device:GPU:")
    }
    got = {d.id: d for d in load(path, cache=False).meta.devices}
    assert sorted(got) == sorted(want) and want
    for ordinal, stats in want.items():
        dev = got[ordinal]
        assert (dev.clock_rate_khz, dev.memory_bandwidth_bytes_per_s) == (
            stats["clock_rate"],
            stats["memory_bandwidth"],
        )
        assert (dev.sm_count, dev.total_memory) == (stats["core_count"], stats["memory_size"])
    assert got[0].clock_rate_khz == 2_100_000 and got[0].memory_bandwidth_bytes_per_s == 2_662_400_000_000


@pytest.mark.corpus
@pytest.mark.parametrize("relative", FILES)
def test_critical_path_memory_efficiency_run(cli, relative: str) -> None:  # type: ignore[no-untyped-def]
    """Issue 16: the commands beyond summary/ops/tree run on every real xplane file: exit 0 with their table
    (critical-path: per-step table; memory / efficiency: their clean message when the capture has no memory
    events or no shapes - see docs/readers.md)."""
    path = corpus_path(relative)
    expected = {
        "critical-path": "Critical path per step",
        "memory": "No [memory] events in this selection",
        "efficiency": "No op could be sized",
    }
    for command, text in expected.items():
        result = cli(command, path, "--width", "100")
        assert result.code == 0, (command, result.err)
        assert text in " ".join(result.out.split()) and "Traceback" not in result.err
        # within 100 columns, but a word longer than a line (a path) keeps a line of its own, whole
        assert all(len(line) <= 100 or len(line.split()) == 1 for line in result.out.splitlines())


@pytest.mark.corpus
@pytest.mark.parametrize("relative", FILES)
def test_ops_and_tree_attribute_to_hlo(cli, relative: str) -> None:  # type: ignore[no-untyped-def]
    """`ops`: an HLO op's GPU self time = the device time of the events whose launch names that op (jaxlib; a
    launch without HLO stats, as in the legacy file, takes them from its device event); `tree`: the module
    nodes hold their launches' device time, with HLO ops (cpu_op) below them."""
    path = corpus_path(relative)
    ref = _reference(path)
    by_op: Counter[str] = Counter()
    by_module: Counter[str] = Counter()
    by_stack: Counter[str] = Counter()  # the JAX name stack ("name" stat): a user_annotation between the two
    for e in ref["gpu"]:  # type: ignore[attr-defined]
        launch = ref["launches"].get(e["correlation"])  # type: ignore[attr-defined]
        if launch is None:
            continue
        stats = launch if launch.get("hlo_op") or launch.get("hlo_module") else e["stats"]
        if stats.get("hlo_op"):
            by_op[stats["hlo_op"]] += e["dur"]
            by_module[stats["hlo_module"]] += e["dur"]
            if stats.get("name"):
                by_stack[stats["name"]] += e["dur"]
    assert by_op
    result = cli("ops", "--format", "json", "--top", "0", path)
    assert result.code == 0, result.err
    rows = {r["name"]: r for r in json.loads(result.out)["rows"]}
    for op, ns in by_op.items():
        assert rows[op]["gpu_self_us"] == pytest.approx(ns / 1000, abs=1e-3)
    for module, ns in by_module.items():
        assert rows[module]["kind"] == "user_annotation"
        assert rows[module]["gpu_total_us"] == pytest.approx(ns / 1000, abs=1e-3)
    for stack, ns in by_stack.items():
        assert rows[stack]["kind"] == "user_annotation"
        assert rows[stack]["gpu_total_us"] == pytest.approx(ns / 1000, abs=1e-3)
    tree = json.loads(cli("tree", "--format", "json", "--depth", "8", "--min-share", "0", path).out)
    found: Counter[str] = Counter()

    def walk(node: dict) -> None:  # type: ignore[type-arg]
        if node["kind"] == "user_annotation" and node["name"] in by_module:
            found[node["name"]] += round(node["gpu_us"] * 1000)
            assert {c["kind"] for c in node["children"]} <= {"cpu_op", "user_annotation", "other"}
            return
        for child in node.get("children", []):
            walk(child)

    walk(tree["root"])
    assert found.keys() == by_module.keys()
    for module, ns in by_module.items():
        assert found[module] == pytest.approx(ns, abs=len(ref["gpu"]))  # type: ignore[arg-type]


@pytest.mark.corpus
def test_every_command_runs(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = corpus_path(FILES[1])
    for argv in (
        ("summary",),
        ("analyze",),
        ("kernels",),
        ("steps",),
        ("ops",),
        ("tree",),
        ("export", "--folded", "-o", tmp_path / "f.txt"),
    ):
        result = cli(*argv, path)
        assert result.code == 0, (argv, result.err)
    other = corpus_path(FILES[0])
    assert cli("diff", path, other).code == 0
    assert cli("ranks", path, other).code == 0
    pytest.importorskip("jinja2")
    report = cli("report", path, "-o", tmp_path / "r.html")
    assert report.code == 0, report.err
    assert "custom-call.1" in (tmp_path / "r.html").read_text()


@pytest.mark.corpus
def test_profile_folder_and_hosts_as_ranks(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """`logdir/plugins/profile/<run>/<host>.xplane.pb`: the newest run is read; its hosts are the ranks."""
    old = tmp_path / "plugins" / "profile" / "2025_01_01_00_00_00"
    new = tmp_path / "plugins" / "profile" / "2025_06_01_00_00_00"
    old.mkdir(parents=True)
    new.mkdir(parents=True)
    (old / "a.xplane.pb").write_bytes(corpus_path(FILES[0]).read_bytes())
    (new / "host0.xplane.pb").write_bytes(corpus_path(FILES[1]).read_bytes())
    (new / "host1.xplane.pb").write_bytes(corpus_path(FILES[0]).read_bytes())
    (new / "host0.trace.json.gz").write_bytes(b"")  # the JSON twin JAX writes beside: not read
    summary = cli("summary", "--format", "json", tmp_path)
    assert summary.code == 0, summary.err
    assert "plugins/profile/2025_06_01_00_00_00/host" in summary.out
    ranks = cli("ranks", "--format", "json", tmp_path)
    assert ranks.code == 0, ranks.err
    doc = json.loads(ranks.out)
    assert [r["rank"] for r in doc["ranks"]] == [0, 1]


# -- hand-made XSpace messages (labelled: built here, not recorded) -------------------------------------------


def _handmade_space(tmp_path: Path) -> Path:
    """HAND-MADE: a CUDA-style GPU plane with fields the real MI300X files lack (regs / static + dynamic shared
    memory / occ_pct in kernel_details, a memset, a memcpy with a size, a derived non-stream line, stats on the
    event metadata, picosecond offsets that are not whole nanoseconds) and a host plane with its launch."""
    from opscope.ingest.xplane_proto import messages

    m = messages()
    space = m["XSpace"](hostnames=["handmade"])
    gpu = space.planes.add(id=1, name="/device:GPU:3")
    for key, name in {
        1: "correlation_id",
        2: "kernel_details",
        3: "hlo_op",
        4: "hlo_module",
        5: "memcpy_details",
        6: "compute_cap_major",
        7: "compute_cap_minor",
        8: "device_name",
        9: "fusion.7",
    }.items():
        gpu.stat_metadata[key].id = key
        gpu.stat_metadata[key].name = name
    gpu.stats.add(metadata_id=6, int64_value=9)
    gpu.stats.add(metadata_id=7, int64_value=0)
    gpu.stats.add(metadata_id=8, str_value="NVIDIA H100 80GB HBM3")
    for key, name in {10: "fusion_kernel", 11: "Memset", 12: "MemcpyD2D", 13: "fusion.7 (XLA Ops)"}.items():
        gpu.event_metadata[key].id = key
        gpu.event_metadata[key].name = name
    gpu.event_metadata[10].stats.add(metadata_id=4, str_value="jit_train")  # module from the metadata
    stream = gpu.lines.add(id=7, name="Stream #7(Compute)", timestamp_ns=1000)
    kernel = stream.events.add(metadata_id=10, offset_ps=2_500, duration_ps=10_499)
    kernel.stats.add(metadata_id=1, uint64_value=41)
    kernel.stats.add(
        metadata_id=2,
        str_value="regs:40 static_shared:1024 dynamic_shared:2048 grid:8,2,1 block:128,1,1 occ_pct:62.5",
    )
    kernel.stats.add(metadata_id=3, ref_value=9)
    stream.events.add(metadata_id=11, offset_ps=20_000, duration_ps=1_500)
    copy = stream.events.add(metadata_id=12, offset_ps=30_000, duration_ps=4_000)
    copy.stats.add(metadata_id=5, str_value="kind:DeviceToDevice size:4096 dest:3 async:1")
    derived = gpu.lines.add(id=100, name="XLA Ops", timestamp_ns=1000)
    derived.events.add(metadata_id=13, offset_ps=2_500, duration_ps=10_499)
    host = space.planes.add(id=2, name="/host:CPU")
    for key, name in {1: "correlation_id", 3: "hlo_op", 4: "hlo_module", 5: "step_num"}.items():
        host.stat_metadata[key].id = key
        host.stat_metadata[key].name = name
    for key, name in {1: "cuLaunchKernel", 2: "train"}.items():
        host.event_metadata[key].id = key
        host.event_metadata[key].name = name
    thread = host.lines.add(id=55, name="main", timestamp_ns=900)
    step = thread.events.add(metadata_id=2, offset_ps=0, duration_ps=200_000)
    step.stats.add(metadata_id=5, int64_value=4)
    launch = thread.events.add(metadata_id=1, offset_ps=50_000, duration_ps=3_000)
    launch.stats.add(metadata_id=1, uint64_value=41)
    launch.stats.add(metadata_id=3, str_value="fusion.7")
    launch.stats.add(metadata_id=4, str_value="jit_train")
    path = tmp_path / "handmade.xplane.pb"
    path.write_bytes(space.SerializeToString())
    return path


def test_handmade_gpu_fields(tmp_path: Path) -> None:
    trace = load(_handmade_space(tmp_path), cache=False)
    ev = trace.events
    by_name = {r[Col.NAME]: r for r in ev.iter_rows(named=True)}
    k = by_name["fusion_kernel"]
    assert k[Col.KIND] == Kind.KERNEL and (k[Col.DEVICE], k[Col.STREAM]) == (3, 7)
    assert (k[Col.TS_NS], k[Col.DUR_NS]) == (1002, 10)  # 1000 ns + 2.5 ns floored; 10.499 ns rounded
    assert (k[Col.GRID_X], k[Col.GRID_Y], k[Col.BLOCK_X], k[Col.REGISTERS]) == (8, 2, 128, 40)
    assert (k[Col.SHARED_MEMORY], k[Col.OCCUPANCY_PCT]) == (3072, 62.5)
    assert (k[Col.HLO_OP], k[Col.HLO_MODULE], k[Col.CORRELATION]) == ("fusion.7", "jit_train", 41)
    assert by_name["Memset"][Col.KIND] == Kind.MEMSET and by_name["Memset"][Col.DUR_NS] == 2  # 1.5 ns half up
    assert by_name["MemcpyD2D"][Col.KIND] == Kind.MEMCPY and by_name["MemcpyD2D"][Col.BYTES] == 4096
    assert by_name["fusion.7 (XLA Ops)"][Col.KIND] == Kind.GPU_ANNOTATION
    assert by_name["cuLaunchKernel"][Col.KIND] == Kind.RUNTIME
    assert by_name["train"][Col.KIND] == Kind.USER_ANNOTATION and by_name["train"][Col.STEP_NUM] == 4
    assert trace.meta.devices[0].name == "NVIDIA H100 80GB HBM3"
    assert trace.meta.devices[0].compute_capability == "9.0"
    # derived scopes: module > op > launch, spanning the launch
    scopes = ev.filter(pl.col(Col.CAT).cast(pl.String).is_in(["xla_op", "xla_module", "xla_name_stack"]))
    assert sorted(
        zip(
            scopes[Col.NAME].to_list(),
            scopes[Col.KIND].to_list(),
            scopes[Col.TS_NS].to_list(),
            scopes[Col.DUR_NS].to_list(),
        )
    ) == [("fusion.7", "cpu_op", 950, 3), ("jit_train", "user_annotation", 950, 3)]


def test_handmade_steps(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    result = cli("steps", "--format", "json", _handmade_space(tmp_path))
    assert result.code == 0, result.err
    doc = json.loads(result.out)
    assert [(r["step"], r["name"]) for r in doc["steps"]] == [(4, "train#4")]


# -- damaged input -------------------------------------------------------------------------------------------


def _plane_ends(data: bytes) -> list[int]:
    """Independent of the reader's framing walk: where each plane's field ends in the file, from the sizes the
    protobuf runtime gives the planes it decodes out of the whole file (tag, length, body), in order."""
    from opscope.ingest.xplane_proto import messages

    space = messages()["XSpace"]()
    space.ParseFromString(data)
    assert space.ByteSize() == len(data)  # the runtime's sizes are the file's
    ends, pos = [], 0
    for plane in space.planes:
        body = plane.ByteSize()
        size, length = body, 1
        while size >= 0x80:
            size >>= 7
            length += 1
        pos += 1 + length + body
        ends.append(pos)
    return ends


@pytest.mark.corpus
@pytest.mark.parametrize("fraction", [0.3, 0.5, 0.75, 0.99, 0.9999])
def test_cut_off_file_keeps_every_whole_plane(cli, tmp_path: Path, fraction: float) -> None:  # type: ignore[no-untyped-def]
    """A file cut off mid-write keeps every plane that lies whole before the cut, and says so; the same for
    a gzip stream cut off (what it decompresses to, up to the cut)."""
    data = corpus_path(FILES[1]).read_bytes()
    ends = _plane_ends(data)
    cut = int(len(data) * fraction)
    whole = sum(end <= cut for end in ends)
    assert whole >= 1
    plain = tmp_path / "cut.xplane.pb"
    plain.write_bytes(data[:cut])
    trace = load(plain, cache=False)
    assert trace.meta.truncated
    assert f"salvaged {whole:,} complete planes" in trace.meta.warnings[0]
    result = cli("summary", plain, "--format", "json")
    assert result.code == 0 and "cut off mid-write" in result.err
    assert cli("summary", plain, "--strict").code == 2
    zipped = tmp_path / "cut.xplane.pb.gz"
    compressed = gzip.compress(data)
    zipped.write_bytes(compressed[: int(len(compressed) * fraction)])
    decompressed = zlib.decompressobj(wbits=31).decompress(zipped.read_bytes())
    kept = sum(end <= len(decompressed) for end in ends)
    if kept == 0:
        with pytest.raises(InputError, match="nothing to salvage"):
            load(zipped, cache=False)
        return
    trace = load(zipped, cache=False)
    assert trace.meta.truncated and f"salvaged {kept:,} complete planes" in trace.meta.warnings[0]


@pytest.mark.corpus
def test_cut_before_the_first_plane_and_damage_are_one_line(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    data = corpus_path(FILES[1]).read_bytes()
    first_end = _plane_ends(data)[0]
    cut = tmp_path / "cut.xplane.pb"
    cut.write_bytes(data[: first_end - 1])
    result = cli("summary", cut)
    assert result.code == 2 and "nothing to salvage" in result.err
    assert len(result.err.strip().splitlines()) == 1 and "Traceback" not in result.err
    damaged = tmp_path / "damaged.xplane.pb"
    damaged.write_bytes(b"\x0a\x05/host" + data)  # a plane field that claims 5 bytes, then garbage framing
    result = cli("summary", damaged)
    assert result.code == 2 and "Traceback" not in result.err
    assert len(result.err.strip().splitlines()) == 1


@pytest.mark.corpus
def test_random_damage_never_crashes(tmp_path: Path) -> None:
    """Seeded truncations and byte flips of a real file: a trace or an InputError, never another exception."""
    data = corpus_path(FILES[1]).read_bytes()
    rng = random.Random(16)
    path = tmp_path / "damaged.xplane.pb"
    for i in range(60):
        damaged = bytearray(data[: rng.randrange(1, len(data))] if i % 2 else data)
        for _ in range(rng.randrange(0, 8)):
            damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        path.write_bytes(bytes(damaged))
        try:
            load(path, cache=False)
        except InputError as exc:
            assert "\n" not in str(exc)


# -- traces recorded here with jax on the CPU ----------------------------------------------------------------

_SCRIPT = """
import jax, jax.numpy as jnp

@jax.jit
def step(x, w):
    y = jnp.tanh(x @ w)
    return y.sum(), y

x = jnp.ones((64, 64)); w = jnp.full((64, 64), 0.01)
step(x, w)[0].block_until_ready()
with jax.profiler.trace(LOGDIR):
    for i in range(3):
        with jax.profiler.StepTraceAnnotation("train", step_num=i):
            step(x, w)[0].block_until_ready()
"""


@pytest.fixture(scope="module")
def jax_logdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real JAX profile recorded on the CPU in a child process (3 steps of a jitted function)."""
    import subprocess
    import sys

    pytest.importorskip("jax")
    logdir = tmp_path_factory.mktemp("jaxlog")
    code = _SCRIPT.replace("LOGDIR", repr(str(logdir)))
    subprocess.run(
        [sys.executable, "-c", code],
        check=True,
        timeout=300,
        env={**__import__("os").environ, "JAX_PLATFORMS": "cpu"},
    )
    return logdir


def test_recorded_jax_xplane(cli, jax_logdir: Path) -> None:  # type: ignore[no-untyped-def]
    """The folder reads as its newest run's xplane; XLA CPU thunks carry hlo_module / hlo_op; 3 steps."""
    trace = load(jax_logdir, cache=False)
    assert trace.meta.format == "xplane" and trace.path.endswith(".xplane.pb")
    ev = trace.events
    thunks = ev.filter(pl.col(Col.HLO_MODULE).cast(pl.String) == "jit_step")
    assert thunks.height >= 3 and thunks[Col.HLO_OP].null_count() == 0
    # event counts per (line, name) equal jaxlib's decoding of the same file
    want: Counter[tuple[str, str]] = Counter()
    for plane in _profile(Path(trace.path)).planes:
        for line in plane.lines:
            for event in line.events:
                want[(line.name, event.name)] += 1
    host = ev.filter(~pl.col(Col.CAT).cast(pl.String).is_in(["xla_op", "xla_module", "xla_name_stack"]))
    got = Counter(zip(host[Col.TID].cast(pl.String).to_list(), host[Col.NAME].cast(pl.String).to_list()))
    assert got == want
    steps = json.loads(cli("steps", "--format", "json", jax_logdir).out)
    assert [r["step"] for r in steps["steps"]] == [0, 1, 2]
    ops = json.loads(cli("ops", "--format", "json", "--top", "0", jax_logdir).out)
    names = {r["name"]: r for r in ops["rows"]}
    assert names["train"]["calls"] == 3
    assert all(op in names for op in thunks[Col.HLO_OP].cast(pl.String).unique().to_list())


def test_recorded_jax_trace_json(jax_logdir: Path) -> None:
    """JAX's trace.json.gz through the Kineto reader: hlo_op / hlo_module args, steps by step_num, JAX's
    process and thread names."""
    run = next((jax_logdir / "plugins" / "profile").iterdir())
    path = next(run.glob("*.trace.json.gz"))
    trace = load(path, cache=False)
    ev = trace.events
    hlo = ev.filter(pl.col(Col.HLO_MODULE).cast(pl.String) == "jit_step")
    assert hlo.height >= 3 and hlo[Col.HLO_OP].null_count() == 0
    assert set(hlo[Col.KIND].cast(pl.String).to_list()) == {Kind.CPU_OP}
    steps = ev.filter(pl.col(Col.STEP_NUM).is_not_null())
    assert sorted(steps[Col.STEP_NUM].to_list()) == [0, 1, 2]
    assert set(steps[Col.KIND].cast(pl.String).to_list()) == {Kind.USER_ANNOTATION}
    from opscope.analysis.base.windows import marker_windows

    assert [w.step for w in marker_windows(trace)] == [0, 1, 2]
    # the same events as the xplane of the same run (JAX writes both from one recording)
    xplane = load(next(run.glob("*.xplane.pb")), cache=False).events
    assert (
        hlo.height
        == xplane.filter(pl.col(Col.HLO_MODULE).cast(pl.String) == "jit_step")
        .filter(pl.col(Col.CAT).cast(pl.String) == "cpu_op")
        .height
    )


# -- Nsight Systems exports of XLA programs: TSL:XlaModule / TSL:Thunk NVTX ranges --------------------------


@pytest.mark.corpus
def test_nsys_xla_nvtx_ranges_attribute_kernels(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A real nsys export (saxpy, A100) with XLA's NVTX ranges ADDED BY HAND around each kernel's launch calls
    (a module range, and one thunk range per kernel): ops / tree attribute every kernel to its HLO op and
    module, with the kernel durations the SQL says."""
    import shutil
    import sqlite3

    path = tmp_path / "xla.sqlite"
    shutil.copy(corpus_path("pipit/saxpy-mpi-cuda_nsys_perlmutter0.sqlite"), path)
    db = sqlite3.connect(path)
    launches = db.execute(
        "SELECT min(r.start), max(r.end), r.globalTid, k.end - k.start FROM CUPTI_ACTIVITY_KIND_RUNTIME r "
        "JOIN CUPTI_ACTIVITY_KIND_KERNEL k USING (correlationId) GROUP BY k.correlationId ORDER BY 1"
    ).fetchall()
    assert len(launches) == 5
    expected: dict[str, int] = {}
    for i, (start, end, tid, kernel_ns) in enumerate(launches):
        module = "TSL:XlaModule:#prefix=jit(saxpy)/jit(main),hlo_module=jit_saxpy,program_id=3#"
        db.execute(
            "INSERT INTO NVTX_EVENTS (start, end, eventType, globalTid, text) VALUES (?, ?, 59, ?, ?)",
            (start - 100, end + 100, tid, module),
        )
        db.execute(
            "INSERT INTO NVTX_EVENTS (start, end, eventType, globalTid, text) VALUES (?, ?, 59, ?, ?)",
            (start - 50, end + 50, tid, f"TSL:Thunk:#hlo_op=fusion.{i}#"),
        )
        expected[f"fusion.{i}"] = kernel_ns
    db.commit()
    db.close()
    trace = load(path, cache=False)
    modules = trace.events.filter(pl.col(Col.HLO_MODULE).cast(pl.String) == "jit_saxpy")
    assert modules.height == 5 and set(modules[Col.PROGRAM_ID].to_list()) == {3}
    assert set(modules[Col.NAME_STACK].cast(pl.String).to_list()) == {"jit(saxpy)/jit(main)"}
    rows = {r["name"]: r for r in json.loads(cli("ops", "--format", "json", "--top", "0", path).out)["rows"]}
    for op, ns in expected.items():
        assert rows[op]["kind"] == "cpu_op" and rows[op]["gpu_self_us"] == pytest.approx(ns / 1000, abs=1e-3)
    assert rows["jit_saxpy"]["gpu_total_us"] == pytest.approx(sum(expected.values()) / 1000, abs=1e-3)


def test_xla_nvtx_names() -> None:
    from opscope.ingest.xla_nvtx import parse

    module = parse("TSL:XlaModule:#prefix=jit(f)/concatenate[dimension=0,x=1],hlo_module=jit_f,program_id=2#")
    assert module is not None
    assert (module.kind, module.name, module.hlo_module, module.program_id) == (
        "user_annotation",
        "jit_f",
        "jit_f",
        2,
    )
    assert module.name_stack == "jit(f)/concatenate[dimension=0,x=1]"  # a comma inside a value is kept
    thunk = parse("TSL:Thunk:#hlo_op=fusion.3#")
    assert thunk is not None and (thunk.kind, thunk.name, thunk.hlo_op) == ("cpu_op", "fusion.3", "fusion.3")
    assert parse("TSL:XlaCompile:#module=jit_f#") is None and parse("MPI_Send") is None
    assert parse("TSL:Thunk:##") is None


# -- capture: opscope.profile_jax and `opscope run` on JAX scripts (CPU jax) ---------------------------------

_RUN_SCRIPT = """
import jax, jax.numpy as jnp

@jax.jit
def g(x):
    return jnp.tanh(x @ x).sum()

x = jnp.ones((16, 16))
g(x).block_until_ready()
OWN_TRACE_START
for i in range(2):
    with jax.profiler.StepTraceAnnotation("step", step_num=i):
        g(x).block_until_ready()
OWN_TRACE_STOP
"""


def test_profile_jax_context_manager(tmp_path: Path) -> None:
    jax = pytest.importorskip("jax")
    import opscope

    f = jax.jit(lambda x: (x * 2).sum())
    f(jax.numpy.ones(8)).block_until_ready()
    with opscope.profile_jax(tmp_path / "logs") as prof:
        for i in range(2):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                f(jax.numpy.ones(8)).block_until_ready()
    assert prof.trace_path is not None and prof.trace_path.name.endswith(".xplane.pb")
    assert prof.trace_path.parent.parent == tmp_path / "logs" / "plugins" / "profile"
    trace = prof.load()
    assert trace.meta.format == "xplane"
    assert trace.events.filter(pl.col(Col.STEP_NUM).is_not_null()).height == 2


@pytest.mark.parametrize("own", [False, True])
def test_run_recognises_a_jax_script(cli, tmp_path: Path, own: bool) -> None:  # type: ignore[no-untyped-def]
    """`opscope run` on a script that imports jax profiles it with jax.profiler; a script that records its own
    profile (jax.profiler.start_trace) is read from its own folder."""
    pytest.importorskip("jax")
    script = tmp_path / "jax_script.py"
    own_dir = tmp_path / "own"
    script.write_text(
        _RUN_SCRIPT.replace(
            "OWN_TRACE_START", f"jax.profiler.start_trace({str(own_dir)!r})" if own else ""
        ).replace("OWN_TRACE_STOP", "jax.profiler.stop_trace()" if own else "")
    )
    result = cli("run", "--format", "json", "--log-dir", tmp_path / "ours", "--", "python", script)
    assert result.code == 0, result.err
    doc = json.loads(result.out)
    path = json.dumps(doc)
    assert ("own/plugins/profile" in path) == own and ".xplane.pb" in path


# -- the decoder under arbitrary bytes (hypothesis) -----------------------------------------------------------

_HEAD = b"\x0a\x20\x12\x09/host:CPU"  # an XSpace that starts like a real one: plane 1, name "/host:CPU"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.binary(max_size=600), gzipped=st.booleans())
def test_arbitrary_bytes_are_a_trace_or_one_line_error(tmp_path: Path, body: bytes, gzipped: bool) -> None:
    """Whatever follows a plausible XSpace start (and a gzip wrapper or not): detected as xplane, and either read
    or refused with a one-line InputError; never another exception."""
    import gzip as gz

    data = _HEAD + body
    path = tmp_path / "fuzz.xplane.pb"
    path.write_bytes(gz.compress(data) if gzipped else data)
    assert detect(path, str(path)).name == "xplane"
    try:
        trace = load(path, cache=False)
    except InputError as exc:
        assert "\n" not in str(exc)
    else:
        assert trace.meta.format == "xplane"


def test_jax_trace_json_gpu_conventions(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """HAND-MADE JAX-style trace.json (the layout jax.profiler writes; no GPU JAX trace.json is in the corpus):
    kinds from TSL process / thread names, device and stream from them, the launch linked by correlation_id
    and attributed to its HLO op and module."""
    doc = {
        "displayTimeUnit": "ns",
        "traceEvents": [
            {"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "/device:GPU:2"}},
            {"ph": "M", "pid": 1, "tid": 13, "name": "thread_name", "args": {"name": "Stream #13(Compute)"}},
            {"ph": "M", "pid": 1, "tid": 99, "name": "thread_name", "args": {"name": "XLA Ops"}},
            {"ph": "M", "pid": 7, "name": "process_name", "args": {"name": "/host:CPU"}},
            {"ph": "M", "pid": 7, "tid": 5, "name": "thread_name", "args": {"name": "python"}},
            {"ph": "X", "pid": 7, "tid": 5, "ts": 0, "dur": 100, "name": "train", "args": {"step_num": "2"}},
            {
                "ph": "X",
                "pid": 7,
                "tid": 5,
                "ts": 10,
                "dur": 5,
                "name": "cuLaunchKernel",
                "args": {
                    "correlation_id": "77",
                    "hlo_op": "fusion.1",
                    "hlo_module": "jit_f",
                    "program_id": "4",
                },
            },
            {"ph": "X", "pid": 7, "tid": 5, "ts": 20, "dur": 5, "name": "$train.py:3 main"},
            {
                "ph": "X",
                "pid": 1,
                "tid": 13,
                "ts": 30,
                "dur": 8.5,
                "name": "fusion_1",
                "args": {
                    "correlation_id": "77",
                    "hlo_op": "fusion.1",
                    "hlo_module": "jit_f",
                    "name": "jit(f)/add",
                    "kernel_details": "regs:32",
                },
            },
            {"ph": "X", "pid": 1, "tid": 13, "ts": 40, "dur": 1, "name": "MemcpyD2D", "args": {}},
            {"ph": "X", "pid": 1, "tid": 99, "ts": 30, "dur": 8.5, "name": "fusion.1"},
        ],
    }
    path = tmp_path / "host.trace.json"
    path.write_text(json.dumps(doc))
    trace = load(path, cache=False)
    rows = {(r[Col.NAME], r[Col.CAT]): r for r in trace.events.iter_rows(named=True)}
    kernel = rows[("fusion_1", None)]
    assert (kernel[Col.KIND], kernel[Col.DEVICE], kernel[Col.STREAM], kernel[Col.CORRELATION]) == (
        "kernel",
        2,
        13,
        77,
    )
    assert (kernel[Col.HLO_OP], kernel[Col.NAME_STACK], kernel[Col.DUR_NS]) == (
        "fusion.1",
        "jit(f)/add",
        8500,
    )
    assert rows[("MemcpyD2D", None)][Col.KIND] == Kind.MEMCPY
    assert rows[("fusion.1", None)][Col.KIND] == Kind.GPU_ANNOTATION
    assert rows[("cuLaunchKernel", None)][Col.KIND] == Kind.RUNTIME
    assert rows[("train", None)][Col.KIND] == Kind.USER_ANNOTATION
    assert rows[("$train.py:3 main", None)][Col.KIND] == Kind.PYTHON
    assert rows[("fusion.1", "xla_op")][Col.KIND] == Kind.CPU_OP
    assert rows[("jit_f", "xla_module")][Col.PROGRAM_ID] == 4
    ops = {r["name"]: r for r in json.loads(cli("ops", "--format", "json", path).out)["rows"]}
    assert ops["fusion.1"]["gpu_self_us"] == pytest.approx(8.5)
    assert ops["jit_f"]["gpu_total_us"] == pytest.approx(8.5)
    steps = json.loads(cli("steps", "--format", "json", path).out)
    assert [s["step"] for s in steps["steps"]] == [2]
