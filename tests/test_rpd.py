"""rocmProfileData (rpd) databases: read exactly, checked against a direct SQL walk of the same file.

The real file is rocmProfileData's own example output (`rpd/matmul_result.rpd` in the corpus: 85 GPU ops, 125
API calls, one MI-series GPU). The edge cases are hand-made databases (labelled as such), built with the
tables of rpd's schema as that file has them: roctx markers (ranges and instants), ops without an API link,
barrier packets, session-numbered ids beyond 32 bits, an op linked to two API rows, views in place of tables."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

import opscope
from conftest import corpus_path
from opscope.ingest.registry import detect
from opscope.ingest.rocprof import kernel_name
from opscope.model.schema import Col, Kind

MATMUL = "rpd/matmul_result.rpd"


def _sql(path: Path, query: str) -> list[tuple]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        return db.execute(query).fetchall()


def _gpu(events: pl.DataFrame) -> pl.DataFrame:
    return events.filter(pl.col(Col.KIND).cast(pl.String).is_in([Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET]))


@pytest.mark.corpus
def test_the_corpus_rpd_file_reads_exactly() -> None:
    path = corpus_path(MATMUL)
    assert detect(path, str(path)).name == "rpd"
    events = opscope.load(path, cache=False).events
    gpu = _gpu(events)
    # every op, with its kind from its op type, its time and its name (kernels: their description)
    ops = _sql(
        path,
        "SELECT t.string, d.string, o.start, o.end - o.start, o.gpuId, o.queueId FROM rocpd_op o "
        "JOIN rocpd_string t ON t.id = o.opType_id JOIN rocpd_string d ON d.id = o.description_id",
    )
    assert len(ops) == 85 and gpu.height == 85
    kinds = {"KernelExecution": Kind.KERNEL, "FillBuffer": Kind.MEMSET}
    copies = {"CopyHostToDevice": "Memcpy HtoD", "CopyDeviceToHost": "Memcpy DtoH"}
    expected = Counter(
        (
            kinds.get(t, Kind.MEMCPY),
            kernel_name(d) if t == "KernelExecution" else copies.get(t, "Memset (Device)"),
            start,
            dur,
            gpu_id,
            queue,
        )
        for t, d, start, dur, gpu_id, queue in ops
    )
    got = Counter(
        gpu.select(
            pl.col(Col.KIND).cast(pl.String),
            pl.col(Col.NAME).cast(pl.String),
            Col.TS_NS,
            Col.DUR_NS,
            Col.DEVICE,
            Col.STREAM,
        ).iter_rows()
    )
    assert got == expected
    assert Counter(gpu[Col.KIND].cast(pl.String)) == {Kind.KERNEL: 29, Kind.MEMCPY: 55, Kind.MEMSET: 1}
    # copies carry their call's size
    sizes = sum(r[0] for r in _sql(path, "SELECT size FROM rocpd_copyapi"))
    assert gpu.filter(pl.col(Col.KIND).cast(pl.String) == Kind.MEMCPY)[Col.BYTES].sum() == sizes
    # every API call is a runtime event with its name, time and thread (no roctx markers in this file)
    api = _sql(
        path,
        "SELECT s.string, a.start, a.end - a.start, a.pid, a.tid, a.id FROM rocpd_api a "
        "JOIN rocpd_string s ON s.id = a.apiName_id",
    )
    runtime = events.filter(pl.col(Col.KIND).cast(pl.String) == Kind.RUNTIME)
    assert Counter(
        runtime.select(
            pl.col(Col.NAME).cast(pl.String),
            Col.TS_NS,
            Col.DUR_NS,
            pl.col(Col.PID).cast(pl.String).cast(pl.Int64),
            pl.col(Col.TID).cast(pl.String).cast(pl.Int64),
            Col.CORRELATION,
        ).iter_rows()
    ) == Counter(api)
    # the links: each op's correlation is its API call's id (rocpd_api_ops)
    links = dict(_sql(path, "SELECT op_id, api_id FROM rocpd_api_ops"))
    assert len(links) == 85
    linked = gpu.join(runtime.select(Col.CORRELATION, pl.col(Col.NAME).alias("launch")), on=Col.CORRELATION)
    assert linked.height == 85
    launches = Counter(
        linked.filter(pl.col(Col.KIND).cast(pl.String) == Kind.KERNEL)["launch"].cast(pl.String)
    )
    assert launches == {"hipLaunchKernel": 28, "hipExtModuleLaunchKernel": 1}


@pytest.mark.corpus
def test_the_corpus_rpd_file_runs_every_analysis(cli) -> None:
    path = str(corpus_path(MATMUL))
    summary = cli("summary", path, "--format", "json")
    assert summary.code == 0, summary.err
    assert "views, virtual tables" not in summary.err  # rpd's own views are expected, not worth a warning
    totals = json.loads(summary.out)["totals"]
    direct = _sql(Path(path), "SELECT sum(end - start), count(*) FROM rocpd_op")[0]
    assert (round(totals["gpu_time_us"] * 1000), totals["calls"]) == direct
    analyze = json.loads(cli("analyze", path, "--format", "json").out)
    # every kernel linked to its launch call: the longest launch delay, as the raw tables give it
    (longest,) = _sql(
        Path(path),
        "SELECT max(o.start - a.start) FROM rocpd_op o JOIN rocpd_api_ops l ON l.op_id = o.id "
        "JOIN rocpd_api a ON a.id = l.api_id JOIN rocpd_string t ON t.id = o.opType_id "
        "WHERE t.string = 'KernelExecution'",
    )[0]
    assert round(analyze["launch_delay_us"]["max"] * 1000) == longest
    for command in ("advise", "critical-path", "steps", "ops", "brief", "efficiency", "memory"):
        assert cli(command, path).code == 0, command


# -- hand-made rpd databases (edge cases; tables as rocmProfileData creates them) --------------------------------

SCHEMA = (
    'CREATE TABLE "rocpd_string" ("id" integer NOT NULL PRIMARY KEY, "string" varchar(4096) NOT NULL)',
    'CREATE TABLE "rocpd_op" ("id" integer NOT NULL PRIMARY KEY, "gpuId" integer NOT NULL, "queueId" integer '
    'NOT NULL, "sequenceId" integer NOT NULL, "completionSignal" varchar(18) NOT NULL, "start" integer NOT '
    'NULL, "end" integer NOT NULL, "description_id" integer NOT NULL, "opType_id" integer NOT NULL)',
    'CREATE TABLE "rocpd_api" ("id" integer NOT NULL PRIMARY KEY, "pid" integer NOT NULL, "tid" integer NOT '
    'NULL, "start" integer NOT NULL, "end" integer NOT NULL, "apiName_id" integer NOT NULL, "args_id" integer '
    "NOT NULL)",
    'CREATE TABLE "rocpd_api_ops" ("id" integer NOT NULL PRIMARY KEY, "api_id" integer NOT NULL, "op_id" '
    "integer NOT NULL)",
    'CREATE TABLE "rocpd_copyapi" ("api_ptr_id" integer NOT NULL PRIMARY KEY, "stream" varchar(18) NOT NULL, '
    '"size" integer NOT NULL, "width" integer NOT NULL, "height" integer NOT NULL, "kind" integer NOT NULL, '
    '"dst" varchar(18) NOT NULL, "src" varchar(18) NOT NULL, "dstDevice" integer NOT NULL, "srcDevice" integer '
    'NOT NULL, "sync" bool NOT NULL, "pinned" bool NOT NULL)',
    'CREATE TABLE "rocpd_metadata" ("id" integer NOT NULL PRIMARY KEY, "tag" varchar(4096) NOT NULL, "value" '
    "varchar(4096) NOT NULL)",
    'CREATE TABLE "ext_autogradapi" ("api_ptr_id" integer NOT NULL PRIMARY KEY, "autogradName_id" integer NOT '
    'NULL, "seq" integer NOT NULL, "op_id" integer NOT NULL, "sizes" varchar(4096) NOT NULL, "input_op_ids" '
    "varchar(4096) NOT NULL)",
    "CREATE VIEW op AS SELECT id, start, end FROM rocpd_op",  # rpd's own conveniences: no warning
)
S = 1 << 32  # a second session's ids: session << 32 | n
STRINGS = {
    S + 1: "",
    S + 2: "hipLaunchKernel",
    S + 3: "UserMarker",
    S + 4: "step 1",
    S + 5: "KernelExecution",
    S + 6: "gemm_kernel(float*, int)",
    S + 7: "BarrierAnd",
    S + 8: "CopyDeviceToDevice",
    S + 9: "hipMemcpyAsync",
    S + 10: "mark here",
    S + 11: "aten::mm",
    S + 12: "Task",
    S + 13: "hipGraphLaunch",
}


def _database(path: Path) -> Path:
    with sqlite3.connect(path) as db:
        for statement in SCHEMA:
            db.execute(statement)
        db.executemany("INSERT INTO rocpd_string VALUES (?, ?)", STRINGS.items())
        db.executemany(
            "INSERT INTO rocpd_api VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                (S + 1, 7, 8, 1_000, 9_000, S + 3, S + 4),  # a roctx range "step 1"
                (S + 2, 7, 8, 2_000, 2_500, S + 2, S + 1),  # hipLaunchKernel
                (S + 3, 7, 8, 3_000, 3_400, S + 9, S + 1),  # hipMemcpyAsync
                (S + 4, 7, 8, 5_000, 5_000, S + 3, S + 10),  # a roctx mark (no duration)
                (S + 5, 7, 8, 5_500, 5_600, S + 2, S + 1),  # a second launch, for the same op as S + 2
                (S + 6, 7, 8, 1_500, 2_600, S + 3, S + 11),  # a marker the autograd hook names: aten::mm
                (S + 7, 7, 8, 8_200, 8_300, S + 13, S + 1),  # hipGraphLaunch
            ],
        )
        db.executemany(
            "INSERT INTO rocpd_op VALUES (?, ?, ?, 0, '', ?, ?, ?, ?)",
            [
                (S + 1, 3, 1, 4_000, 6_000, S + 6, S + 5),  # the kernel
                (S + 2, 3, 1, 6_500, 7_000, S + 1, S + 8),  # a device-to-device copy
                (S + 3, 3, 1, 7_000, 7_000, S + 1, S + 7),  # a barrier packet: no work
                (S + 4, 3, 2, 8_000, 8_100, S + 6, S + 5),  # a kernel with no API row
                (S + 5, 3, 1, 9_000, 9_300, S + 6, S + 12),  # a kernel node of the graph
            ],
        )
        db.executemany(
            "INSERT INTO rocpd_api_ops (api_id, op_id) VALUES (?, ?)",
            [(S + 2, S + 1), (S + 5, S + 1), (S + 3, S + 2), (S + 7, S + 5)],
        )
        db.execute("INSERT INTO ext_autogradapi VALUES (?, ?, 1, 1, '', '')", (S + 6, S + 11))
        db.execute("INSERT INTO rocpd_copyapi VALUES (?, '0x0', 4096, 0, 0, 4, '', '', 0, 0, 0, 0)", (S + 3,))
        db.execute("INSERT INTO rocpd_metadata (tag, value) VALUES ('schema_version', '2')")
    return path


def test_markers_links_barriers_and_session_ids(tmp_path: Path) -> None:
    """Hand-made: every case in one small file, each value checked."""
    path = _database(tmp_path / "edge.rpd")
    trace = opscope.load(path, cache=False)
    rows = {
        (r[Col.KIND], r[Col.NAME]): r
        for r in trace.events.with_columns(pl.col(Col.KIND, Col.NAME).cast(pl.String)).iter_rows(named=True)
        if r[Col.KIND] != Kind.METADATA
    }
    kernels = [r for r in trace.events.iter_rows(named=True) if r[Col.KIND] == Kind.KERNEL]
    assert [(k[Col.TS_NS], k[Col.CORRELATION]) for k in kernels] == [
        (4_000, S + 2),
        (8_000, None),
        (9_000, S + 7),
    ]
    assert {k[Col.NAME] for k in kernels} == {"gemm_kernel(float*, int)"}
    copy = rows[(Kind.MEMCPY, "Memcpy DtoD")]
    assert (copy[Col.BYTES], copy[Col.CORRELATION], copy[Col.DUR_NS]) == (4096, S + 3, 500)
    assert copy[Col.BANDWIDTH_GBPS] == pytest.approx(4096 / 500)
    step = rows[(Kind.USER_ANNOTATION, "step 1")]
    assert (step[Col.TS_NS], step[Col.DUR_NS], step[Col.CORRELATION]) == (1_000, 8_000, None)
    mark = rows[(Kind.INSTANT, "mark here")]
    assert (mark[Col.PH], mark[Col.DUR_NS]) == ("i", None)
    assert rows[(Kind.RUNTIME, "hipMemcpyAsync")][Col.CORRELATION] == S + 3
    op = rows[(Kind.CPU_OP, "aten::mm")]
    assert (op[Col.TS_NS], op[Col.DUR_NS], op[Col.CAT], op[Col.CORRELATION]) == (1_500, 1_100, "cpu_op", None)
    assert rows[(Kind.RUNTIME, "hipGraphLaunch")][Col.CORRELATION] == S + 7
    assert not any("views" in w for w in trace.meta.warnings), trace.meta.warnings
    assert not any(kind == Kind.KERNEL and "Barrier" in name for kind, name in rows)
    assert any("BarrierAnd 1" in w for w in trace.meta.warnings), trace.meta.warnings
    assert trace.meta.format == "rpd" and trace.meta.extra["rpd_schema_version"] == "2"


def test_views_named_like_rpd_tables_are_not_an_rpd_file(tmp_path: Path, cli) -> None:
    """Hand-made: the tables must be tables; a view named rocpd_op is code, and the file is not taken for rpd
    (it is one line and exit 2, as any SQLite file that is no trace)."""
    path = tmp_path / "views.rpd"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE t (x integer)")
        for name in ("rocpd_op", "rocpd_api", "rocpd_string"):
            db.execute(f"CREATE VIEW {name} AS SELECT x FROM t")
    assert detect(path, str(path)).name != "rpd"
    done = cli("summary", str(path))
    assert done.code == 2 and done.err.count("\n") == 1, done.err


def test_the_reader_is_listed(cli) -> None:
    out = json.loads(cli("formats", "--format", "json").out)
    assert "rpd" in {f["name"] for f in out["formats"]}


@pytest.mark.corpus
@pytest.mark.parametrize("keep", [0.25, 0.5, 0.9])
def test_a_cut_off_rpd_file_is_one_line(tmp_path: Path, cli, keep: float) -> None:
    """The corpus file cut short (written to a temporary folder): one line on standard error, never a
    traceback (an SQLite file cannot be salvaged past a missing page)."""
    data = corpus_path(MATMUL).read_bytes()
    path = tmp_path / "cut.rpd"
    path.write_bytes(data[: int(len(data) * keep)])
    done = cli("summary", str(path))
    assert done.code == 2 and "Traceback" not in done.err and done.err.count("\n") == 1, done.err
    assert "damaged or unreadable SQLite file" in done.err
