"""Predictions kept in the history (issue 53, docs/history.md "Predictions"): each run stores its findings'
predicted savings; a run added after one whose finding it no longer has stores the pair (predicted per step,
realised per step, ratio); `history show --predictions` and `history check` report each rule's record. On the
corpus' real ResNet-50 pair (DataLoader workers 0, then 4), on SQLite and PostgreSQL; the figures equal `diff`'s."""

from __future__ import annotations

import json

import pytest

from conftest import corpus_path
from history_support import db  # noqa: F401  (the sqlite / postgresql fixture)
from opscope.history.api import History

BEFORE = "kineto/tb_plugin_samples_resnet50_num_workers_0_worker0.1623143089861.pt.trace.json.gz"
AFTER = "kineto/tb_plugin_samples_resnet50_profiler_api_num_workers_4_worker0.pt.trace.json.gz"


@pytest.mark.corpus
def test_history_keeps_the_prediction_and_what_the_fix_realised(cli, db: str) -> None:  # noqa: F811
    for rel in (BEFORE, AFTER):
        assert cli("history", "add", "--db", db, corpus_path(rel)).code == 0
    diff = json.loads(cli("diff", corpus_path(BEFORE), corpus_path(AFTER), "--format", "json").out)
    (fixed,) = [f for f in diff["findings"]["fixed"] if f["id"] == "dataloader_bound"]
    expected = fixed["realised"]
    with History(db) as history:
        (record,) = [r for r in history.predictions() if r.rule == "dataloader_bound"]
        runs = history.runs()
    (pair,) = record.pairs
    assert (pair.from_run, pair.run_id) == (runs[0].id, runs[1].id)
    assert pair.predicted_per_step_us == pytest.approx(expected["predicted_per_step_us"], abs=0.01)
    assert pair.realised_per_step_us == pytest.approx(expected["realised_per_step_us"], abs=0.01)
    assert pair.ratio == pytest.approx(expected["ratio"], abs=1e-3)
    assert record.text() == f"dataloader_bound: 1 fix, realised {expected['ratio']:.2f}x of predicted"
    shown = cli("history", "show", "--db", db, "--predictions", "--format", "json")
    assert shown.code == 0, shown.err
    data = json.loads(shown.out)
    assert data["schema"] == "opscope.history.predictions/1"
    (rule,) = [r for r in data["rules"] if r["rule"] == "dataloader_bound"]
    assert rule["fixes"] == 1 and rule["pairs"][0]["run_id"] == runs[1].id
    text = cli("history", "show", "--db", db, "--predictions").out
    assert record.text() in text
    check = cli("history", "check", "--db", db, "--format", "json")
    assert [r["text"] for r in json.loads(check.out)["predictions"]] == [
        r.text() for r in history_records(db)
    ]
    assert f"predictions: {record.text()}" in cli("history", "check", "--db", db).out


def history_records(db: str) -> list:  # noqa: F811
    with History(db) as history:
        return history.predictions()


@pytest.mark.corpus
def test_no_pair_without_a_fix(cli, db: str) -> None:  # noqa: F811
    """The same job added twice in the other order: the finding appears, nothing was fixed, no pair; the
    prediction of each run is stored all the same."""
    for rel in (AFTER, BEFORE):
        assert cli("history", "add", "--db", db, corpus_path(rel)).code == 0
    with History(db) as history:
        assert [r for r in history.predictions() if r.rule == "dataloader_bound"] == []
        stored = history.series("global", None, "steps")
    assert len(stored) == 2
    text = cli("history", "show", "--db", db, "--predictions").out
    assert "no fix recorded yet" in text
