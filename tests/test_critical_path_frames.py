"""Host time on the critical path between operators, by Python frame (analysis/critical_path/host_frames.py,
docs/critical-path.md): on the real MI300X OWLv2 trace (with_stack), the path's time inside the step and the
DataLoader annotations is the Hugging Face image processor's, and its heaviest frame, scipy's `zoom`, is checked
against a plain-Python recomputation over the raw frames; without frames the command says how much it is and
how to name it."""

from __future__ import annotations

import json
from functools import cache

import polars as pl
import pytest

import opscope
from conftest import corpus_path
from opscope.analysis.attribution.frames import FrameFilter, classify
from opscope.analysis.base.linking import link
from opscope.analysis.critical_path.host_frames import host_frames
from opscope.analysis.critical_path.host_time import NO_FRAME
from opscope.analysis.critical_path.kinds import CPU_BOUND
from opscope.analysis.critical_path.stats import CriticalPathStats, critical_path_stats
from opscope.model.schema import Col
from opscope.model.trace import Trace

OWLV2 = "tracelens/mi300__google_owlv2-large-patch14-ensemble__1016001.json.gz"
V100 = "hta/ns_resolution_trace_rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
ZOOM = "scipy/ndimage/_interpolation.py(739): zoom"


@cache
def _owl() -> tuple[Trace, CriticalPathStats]:
    trace = opscope.load(corpus_path(OWLV2))
    return trace, critical_path_stats(trace, None, (), top=5, linkage=link(trace))


def _union(pieces: list[tuple[int, int]]) -> int:
    total, end = 0, None
    for s, e in sorted(pieces):
        if end is None or s > end:
            total += e - s
            end = e
        elif e > end:
            total += e - end
            end = e
    return total


@pytest.mark.corpus
def test_frames_add_up_to_the_host_time_between_operators() -> None:
    trace, stats = _owl()
    (step,) = host_frames(trace, link(trace), stats, top=0)
    (path,) = stats.steps
    assert sum(f.on_path_ns for f in step.frames) == step.between_ops_ns
    assert 0.5 * path.path.length_ns < step.between_ops_ns < path.path.length_ns  # the preprocessing
    assert step.frames[0].frame == ZOOM and step.frames[0].on_path_ns > 0.4 * path.path.length_ns
    assert all(f.frame == NO_FRAME or "(" in f.frame for f in step.frames)


@pytest.mark.corpus
def test_the_heaviest_frame_matches_a_plain_recomputation() -> None:
    """The path's time inside a `zoom` frame and inside no kept frame nested in it, from the raw events."""
    trace, stats = _owl()
    (step,) = host_frames(trace, link(trace), stats, top=0)
    claimed = next(f.on_path_ns for f in step.frames if f.frame == ZOOM)
    events = trace.events.with_row_index("row")
    kinds = events.select("row", pl.col(Col.KIND).cast(pl.String).alias("owner_kind"), Col.PID, Col.TID)
    (path,) = stats.steps
    segments = (
        path.segments.filter(~pl.col("gpu") & (pl.col("kind").cast(pl.String) == CPU_BOUND))
        .join(kinds, left_on="event_row", right_on="row")
        .filter(pl.col("owner_kind") == "user_annotation")
    )
    frames = events.filter(pl.col(Col.KIND).cast(pl.String) == "python_function").select(
        pl.col(Col.NAME).cast(pl.String).alias("name"),
        pl.col(Col.PID).cast(pl.String),
        pl.col(Col.TID).cast(pl.String),
        Col.TS_NS,
        (pl.col(Col.TS_NS) + pl.col(Col.DUR_NS)).alias("end"),
    )
    kept_names = set(classify(frames["name"], FrameFilter()).filter(pl.col("kept"))["name"].to_list())
    kept = [r for r in frames.iter_rows(named=True) if r["name"] in kept_names]
    total = 0
    for z in (r for r in kept if r["name"] == ZOOM):
        inner = [
            (k[Col.TS_NS], k["end"])
            for k in kept
            if (k[Col.PID], k[Col.TID]) == (z[Col.PID], z[Col.TID])
            and z[Col.TS_NS] <= k[Col.TS_NS]
            and k["end"] <= z["end"]
            and (k[Col.TS_NS], k["end"]) != (z[Col.TS_NS], z["end"])
        ]
        for seg in segments.iter_rows(named=True):
            if (str(seg[Col.PID]), str(seg[Col.TID])) != (z[Col.PID], z[Col.TID]):
                continue
            lo, hi = max(seg["src_ts_ns"], z[Col.TS_NS]), min(seg["dst_ts_ns"], z["end"])
            if hi <= lo:
                continue
            cut = [(max(a, lo), min(b, hi)) for a, b in inner if min(b, hi) > max(a, lo)]
            total += (hi - lo) - _union(cut)
    assert claimed == total


@pytest.mark.corpus
def test_the_command_shows_the_frames_and_json_has_them(cli) -> None:
    table = cli("critical-path", corpus_path(OWLV2), "--width", "160")
    assert table.code == 0, table.err
    assert "Host time on the path between operators, by Python frame" in table.out and "zoom" in table.out
    data = json.loads(cli("critical-path", corpus_path(OWLV2), "--format", "json").out)
    (step,) = data["steps"]
    assert step["host_frames"][0]["frame"] == ZOOM
    assert step["host_between_ops_us"] >= sum(f["on_path_us"] for f in step["host_frames"])


@pytest.mark.corpus
def test_without_frames_a_note_says_how_to_name_them(cli) -> None:
    data = json.loads(cli("critical-path", corpus_path(V100), "--format", "json").out)
    assert all(s["host_frames"] == [] for s in data["steps"])
    between = sum(s["host_between_ops_us"] for s in data["steps"])
    text = cli("critical-path", corpus_path(V100), "--width", "160").out
    if between >= 0.01 * sum(s["path_us"] for s in data["steps"]):
        assert "with_stack=True" in text
    else:
        assert "with_stack=True" not in text
