"""Bounded answers of `opscope mcp` (serve/bounds.py) on the real JSON payloads of the CLI: every page is under
the limit, keeps every field, and the pages' rows put back together are the payload's; a row larger than a page
has its nested lists cut and says how many items it left out; the same input gives the same bytes."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from conftest import corpus_path
from opscope.serve.bounds import LEFT_OUT, bounded, row_lists

QWEN = "tracelens/h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
DDP = "hta/nccl_parser_config_nccl_data.json.gz"
META = ("truncated", "next_cursor", "page")


def pages(payload: dict[str, Any], max_chars: int) -> list[str]:
    texts, offset = [], 0
    while True:
        text, offset = bounded(payload, max_chars, offset, lambda o: f"c.{o}")
        texts.append(text)
        if offset is None:
            return texts


def keys(node: Any) -> Any:
    """The shape of a payload: its objects' keys, lists as one marker (their rows are what a page cuts)."""
    if isinstance(node, dict):
        return {k: keys(v) for k, v in node.items()}
    return "list" if isinstance(node, list) else "value"


def reassembled(texts: list[str]) -> dict[str, Any]:
    """The payload put back together from its pages: the first page's fields, each row list the rows of every
    page in turn (checked against each page's `page` entry)."""
    parsed = [json.loads(t) for t in texts]
    whole = copy.deepcopy({k: v for k, v in parsed[0].items() if k not in META})
    for path, rows in row_lists(whole):
        rows.clear()
        for page in parsed:
            node = page
            for key in path:
                node = node[key]
            entry = next((e for e in page["page"] if e["path"] == list(path)), None)
            if entry is None:  # an empty list of the payload has no entry
                assert node == []
                continue
            assert entry["offset"] == len(rows) and entry["count"] == len(node)
            rows.extend(node)
    return whole


@pytest.mark.parametrize(
    ("command", "max_chars"),
    [
        # its largest row (a finding with its evidence, its saving basis and change) is 9,630 characters, each
        # page repeats the scalars (the trace, the GPU, the capture, the validity verdict: about 1,000)
        (["advise", QWEN], 11_000),
        (["analyze", QWEN, "--top", "0"], 12_000),
        (["summary", DDP, "--top", "0"], 14_000),  # 75 kB; one row (two spellings of a long name) is 13 kB
        (["summary", DDP, "--top", "0"], 30_000),
    ],
)
def test_pages_keep_every_field_and_give_back_every_row(cli, command, max_chars) -> None:
    result = cli(*command[:1], corpus_path(command[1]), *command[2:], "--format", "json")
    payload = json.loads(result.out)
    texts = pages(payload, max_chars)
    assert len(texts) > 1 and not any(LEFT_OUT in t for t in texts)
    for text in texts:
        page = json.loads(text)
        assert len(text) <= max_chars and page["truncated"] is True
        assert keys({k: v for k, v in page.items() if k not in META}) == keys(payload)
    assert [json.loads(t)["next_cursor"] for t in texts] == [*[f"c.{o}" for o in _offsets(texts)], None]
    assert reassembled(texts) == payload
    assert pages(payload, max_chars) == texts  # deterministic: the same bytes again


def _offsets(texts: list[str]) -> list[int]:
    """The row offsets at which pages 2..n start (the rows of each page summed)."""
    out, done = [], 0
    for text in texts[:-1]:
        done += sum(e["count"] for e in json.loads(text)["page"])
        out.append(done)
    return out


def test_an_answer_that_fits_is_the_payload_exactly(cli) -> None:
    payload = json.loads(cli("steps", corpus_path(QWEN), "--format", "json").out)
    text, following = bounded(payload, 20_000, 0, str)
    assert following is None and json.loads(text) == payload and "truncated" not in text


def test_a_row_larger_than_a_page_has_its_nested_lists_cut_and_says_how_many(cli) -> None:
    payload = json.loads(cli("advise", corpus_path(QWEN), "--format", "json").out)
    fusion = payload["findings"][0]  # fusion_candidates: 3 evidence items of 8 long kernel names each
    assert fusion["id"] == "fusion_candidates" and len(json.dumps(fusion)) > 3_000
    texts = pages(payload, 2_000)
    cut = next(f for t in texts for f in json.loads(t)["findings"] if f["id"] == "fusion_candidates")
    assert all(len(t) <= 2_000 for t in texts)
    kept = [e for e in cut["evidence"]]
    left_out = cut.get("evidence" + LEFT_OUT, 0)
    assert len(kept) + left_out == len(fusion["evidence"])
    for item, original in zip(kept, fusion["evidence"]):
        assert item["kernels"] == original["kernels"][: len(item["kernels"])]
        assert len(item["kernels"]) + item.get("kernels" + LEFT_OUT, 0) == len(original["kernels"])
        assert {k: v for k, v in item.items() if k != "kernels" and not k.endswith(LEFT_OUT)} == {
            k: v for k, v in original.items() if k != "kernels"
        }
    assert left_out or any(k.endswith(LEFT_OUT) for e in kept for k in e)


def test_hand_made_payload_pages_count_rows_across_lists() -> None:
    # hand-made edge case: two row lists, one nested in an object, rows of one digit each
    payload = {"schema": "x/1", "a": list(range(300)), "b": {"c": list(range(300, 600))}, "n": 1}
    texts = pages(payload, 1_000)
    assert reassembled(texts) == payload
    middle = next(json.loads(t) for t in texts if json.loads(t)["a"] and json.loads(t)["b"]["c"])
    a, c = middle["page"]
    assert a["offset"] + a["count"] == 300 and c["offset"] == 0 and c["count"] == len(middle["b"]["c"])


def test_too_small_a_limit_is_one_line_error() -> None:
    from opscope.errors import UsageError

    payload = {"schema": "x/1", "text": "y" * 5_000, "rows": [1, 2]}
    with pytest.raises(UsageError, match="too small for the fields of this answer alone"):
        bounded(payload, 2_000, 0, str)
    with pytest.raises(UsageError, match="at least 1000"):
        bounded(payload, 10, 0, str)
    with pytest.raises(UsageError, match="too small for one row of rows"):
        bounded({"rows": ["z" * 5_000]}, 2_000, 0, str)
    with pytest.raises(UsageError, match="past the end"):
        bounded({"rows": [1]}, 2_000, 5, str)
