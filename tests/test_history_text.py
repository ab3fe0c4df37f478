"""Text a database cannot hold (issue 32, item 2): a kernel name with NUL (valid JSON: "a\\u0000b") or a lone
surrogate is stored escaped, reversibly, in SQLite and PostgreSQL alike; one bad trace in a `history add` of
many is reported and skipped, the others are added (exit 1). The traces are hand-made edge cases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from history_support import db  # noqa: F401  (the sqlite / postgresql fixture)
from opscope.history.store import ESCAPED, read_text, store_text


def trace_file(path: Path, name: str, dur: int = 5) -> Path:
    events = [
        {
            "ph": "X",
            "cat": "kernel",
            "name": name,
            "pid": 0,
            "tid": 7,
            "ts": 10.0,
            "dur": dur,
            "args": {"device": 0, "stream": 7, "correlation": 1},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "plain_kernel",
            "pid": 0,
            "tid": 7,
            "ts": 20.0,
            "dur": 3,
            "args": {"device": 0, "stream": 7, "correlation": 2},
        },
    ]
    path.write_text(json.dumps({"traceEvents": events}), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "text", ["a\x00b", "\x00", "lone \udcff surrogate", ESCAPED + "looks escaped", "plain", "", "ünïcode €"]
)
def test_escaping_is_reversible_and_leaves_plain_text_alone(text: str) -> None:
    stored = store_text(text)
    assert read_text(stored) == text
    assert "\x00" not in stored
    stored.encode("utf-8")  # what PostgreSQL and the drivers accept: no lone surrogate
    if text in ("plain", "", "ünïcode €"):
        assert stored == text  # databases written before read the same


def test_a_nul_name_goes_in_and_comes_back(cli, tmp_path: Path, db: str) -> None:  # noqa: F811
    good1 = trace_file(tmp_path / "good1.json", "kernel_one")
    nul = trace_file(tmp_path / "nul.json", "a\x00b")
    good2 = trace_file(tmp_path / "good2.json", "kernel_two", dur=6)
    added = cli("history", "add", good1, nul, good2, "--db", db, "--no-git", "--format", "json")
    assert added.code == 0, added.err  # all three: NUL fails no longer
    runs = json.loads(cli("history", "list", "--db", db, "--format", "json").out)
    assert len(runs["runs"]) == 3
    shown = cli("history", "show", "--db", db, "--kernel", "a\x00b", "--format", "json")
    assert shown.code == 0, shown.err
    assert "a\\u0000b" in shown.out and ESCAPED.replace("\x1b", "\\u001b") not in shown.out


def test_one_bad_trace_is_skipped_and_the_others_are_added(cli, tmp_path: Path, db: str) -> None:  # noqa: F811
    good1 = trace_file(tmp_path / "good1.json", "kernel_one")
    bad = tmp_path / "bad.json"
    bad.write_text("this is not a trace", encoding="utf-8")
    good2 = trace_file(tmp_path / "good2.json", "kernel_two", dur=6)
    added = cli("history", "add", good1, bad, good2, "--db", db, "--no-git", "--format", "json")
    assert added.code == 1
    assert "not added" in added.err and "bad.json" in added.err and "Traceback" not in added.err
    runs = json.loads(cli("history", "list", "--db", db, "--format", "json").out)
    assert len(runs["runs"]) == 2
