"""Random damage to real traces (hypothesis: truncations and byte flips, plain and gzip): both readers either
salvage (exit 0) or fail with one clear line (exit 2), never a traceback, a hang or another exit code; and on
cuts alone (no flips) they agree exactly."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import corpus_path
from opscope.cli.main import main

SOURCE = "hta/critical_path_cuda_event_sync_event_sync_trace.json.gz"


def _run(path: Path, reader: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    os.environ["OPSCOPE_READER"] = reader
    try:
        capsys.readouterr()
        code = main(["summary", str(path), "--no-cache", "--format", "json", "--top", "0"])
        out = capsys.readouterr()
    finally:
        os.environ.pop("OPSCOPE_READER", None)
    return code, out.out, out.err


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_damage_is_salvaged_or_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], data: st.DataObject
) -> None:
    raw = gzip.decompress(corpus_path(SOURCE).read_bytes())
    compress = data.draw(st.booleans(), label="gzip")
    blob = bytearray(gzip.compress(raw) if compress else raw)
    cut = data.draw(st.integers(min_value=0, max_value=len(blob)), label="cut")
    blob = blob[:cut]
    flips = data.draw(
        st.lists(st.tuples(st.integers(min_value=0), st.integers(min_value=0, max_value=255)), max_size=4),
        label="flips",
    )
    for position, value in flips:
        if blob:
            blob[position % len(blob)] = value
    path = tmp_path / ("damaged.json.gz" if compress else "damaged.json")
    path.write_bytes(bytes(blob))
    results = {}
    for reader in ("native", "python"):
        code, out, err = _run(path, reader, capsys)
        assert code in (0, 2), (reader, code, err)
        assert "Traceback" not in err and "internal error" not in err, err
        if code == 2:
            lines = [line for line in err.splitlines() if "error" in line]
            assert len(lines) == 1, err
        results[reader] = (code, out)
    if not flips:
        assert results["native"] == results["python"]
