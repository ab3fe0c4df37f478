"""`opscope mcp` through the official MCP SDK's own client: `stdio_client` starts the server as a subprocess and a
`ClientSession` lists its tools and calls them on corpus traces. Each tool's answer is the JSON payload the CLI
prints with `--format json` for the same arguments; a cut answer's pages, followed by their cursors, give back
every row; the size bound holds on the largest corpus trace; paths outside the roots, links leading out and
non-trace files are refused with one line; the same call gives the same bytes, in one session and the next."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

import opscope
from conftest import TRACES, corpus_path

mcp = pytest.importorskip("mcp", reason="the MCP SDK is not installed (pip install -e '.[mcp]')")

from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

from opscope.serve.bounds import row_lists  # noqa: E402

QWEN = "tracelens/h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
BERT_H100 = "tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz"
BERT_MI300 = "tracelens/mi300__gaunernst_bert-small-uncased__1016001.json.gz"
DDP = "hta/nccl_parser_config_nccl_data.json.gz"
LARGEST = "tracelens/rocprof__908_results.json.gz"  # 37 MB of JSON, 43,915 kernel dispatches
ENTRY = "from opscope.cli.main import entry; entry()"
SRC = str(Path(opscope.__file__).resolve().parents[1])
BIG = 10_000_000  # a max_chars no answer here reaches: the whole payload


def run_session(roots: list[Path], work: Callable[[ClientSession], Awaitable[Any]]) -> Any:
    """Start `opscope mcp --root ...` as a subprocess, initialise a session, and run `work` in it."""
    import anyio

    args = ["-c", ENTRY, "mcp", *[a for r in roots for a in ("--root", str(r))]]
    env = {"PYTHONPATH": SRC, "OPSCOPE_CACHE_DIR": os.environ["OPSCOPE_CACHE_DIR"]}

    async def main() -> Any:
        params = StdioServerParameters(command=sys.executable, args=args, env=env)
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            return await work(session)

    # In a thread of its own: a browser test before this one in the same process (Playwright's sync API)
    # leaves an event loop running in the main thread, where anyio.run would refuse to start another.
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(anyio.run, main).result()


def text_of(result: Any) -> str:
    assert len(result.content) == 1 and result.content[0].type == "text"
    return str(result.content[0].text)


def calls(roots: list[Path], wanted: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    async def work(session: ClientSession) -> list[Any]:
        return [await session.call_tool(name, args) for name, args in wanted]

    return run_session(roots, work)


@pytest.fixture(scope="module")
def corpus() -> Path:
    corpus_path(QWEN)  # skips without the corpus
    return TRACES.resolve()


def test_tools_are_listed_with_their_schemas(corpus: Path) -> None:
    async def work(session: ClientSession) -> Any:
        return (await session.list_tools()).tools

    tools = {t.name: t for t in run_session([corpus], work)}
    assert set(tools) == {
        "brief",
        "summary",
        "analyze",
        "advise",
        "ops",
        "steps",
        "lines",
        "critical_path",
        "memory",
        "kernels",
        "diff",
        "formats",
    }
    for tool in tools.values():
        schema = tool.input_schema
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        assert tool.description and {"max_chars", "cursor"} <= set(schema["properties"])
        assert schema["properties"]["max_chars"]["default"] == 20_000
        assert all(p.get("description") or p.get("enum") for p in schema["properties"].values())
        assert tool.annotations is not None and tool.annotations.read_only_hint is True
    assert tools["diff"].input_schema["required"] == ["base", "new"]
    assert tools["formats"].input_schema["required"] == []
    assert tools["critical_path"].input_schema["properties"]["what_if"]["type"] == "array"
    assert tools["summary"].input_schema["required"] == ["trace"]


def _cases(corpus: Path) -> list[tuple[str, dict[str, Any], list[str]]]:
    """(tool, arguments, the same command line) for every tool."""
    qwen, ddp = str(corpus / QWEN), str(corpus / DDP)
    bert, mi300 = str(corpus / BERT_H100), str(corpus / BERT_MI300)
    return [
        ("brief", {"trace": QWEN}, ["brief", qwen]),
        ("summary", {"trace": DDP, "top": 5, "kind": ["kernel"]}, ["summary", ddp, "--top", "5", "--kind", "kernel"]),
        ("summary", {"trace": QWEN, "filter": "-?gemm", "device": [0]}, ["summary", qwen, "--filter=-?gemm", "--device", "0"]),
        ("analyze", {"trace": QWEN, "top": 3}, ["analyze", qwen, "--top", "3"]),
        ("advise", {"trace": DDP}, ["advise", ddp]),
        ("ops", {"trace": QWEN, "by_shape": True, "sort": "total", "top": 8}, ["ops", qwen, "--by-shape", "--sort", "total", "--top", "8"]),
        ("steps", {"trace": DDP, "steps": "5-6"}, ["steps", ddp, "--steps", "5-6"]),
        ("lines", {"trace": QWEN, "top": 5, "depth": 2, "keep": ["torch"], "skip_prefix": ["transformers/"]}, ["lines", qwen, "--top", "5", "--depth", "2", "--keep", "torch", "--skip-prefix", "transformers/"]),
        (
            "critical_path",
            {"trace": DDP, "what_if": ["nccl:0", "aten::copy_:0.5"], "top": 4},
            ["critical-path", ddp, "--what-if", "nccl:0", "--what-if", "aten::copy_:0.5", "--top", "4"],
        ),
        ("memory", {"trace": QWEN, "top": 5}, ["memory", qwen, "--top", "5"]),
        ("kernels", {"trace": QWEN, "top": 5, "filter": "gemm"}, ["kernels", qwen, "--top", "5", "--filter", "gemm"]),
        ("diff", {"base": BERT_H100, "new": BERT_MI300, "top": 5, "per_step": False}, ["diff", bert, mi300, "--top", "5", "--no-per-step"]),
        ("formats", {}, ["formats"]),
    ]  # fmt: skip


def test_each_tool_answers_the_cli_json(cli, corpus: Path) -> None:
    cases = _cases(corpus)
    results = calls([corpus], [(name, {**args, "max_chars": BIG}) for name, args, _ in cases])
    for (name, _, argv), result in zip(cases, results, strict=True):
        expected = cli(*argv, "--format", "json")
        assert expected.code == 0, expected.err
        assert result.is_error is False, text_of(result)
        assert json.loads(text_of(result)) == json.loads(expected.out), name


def test_pages_follow_their_cursors_to_every_row(cli, corpus: Path) -> None:
    async def work(session: ClientSession) -> list[str]:
        texts: list[str] = []
        cursor = None
        while True:
            args: dict[str, Any] = {"trace": DDP, "top": 0, "max_chars": 8_000}
            if cursor is not None:
                args["cursor"] = cursor
            texts.append(text_of(await session.call_tool("ops", args)))
            cursor = json.loads(texts[-1])["next_cursor"]
            if cursor is None:
                return texts

    texts = run_session([corpus], work)
    expected = json.loads(cli("ops", corpus / DDP, "--top", "0", "--format", "json").out)
    assert len(texts) > 2 and all(len(t) <= 8_000 for t in texts)
    pages = [json.loads(t) for t in texts]
    for path, rows in row_lists(expected):
        got = []
        for page in pages:
            node = page
            for key in path:
                node = node[key]
            got += node
        assert got == rows, path
    scalars = {k: v for k, v in expected.items() if not isinstance(v, (list, dict))}
    assert all({k: p[k] for k in scalars} == scalars for p in pages)


def test_the_bound_holds_on_the_largest_trace(cli, corpus: Path) -> None:
    async def work(session: ClientSession) -> list[str]:
        texts: list[str] = []
        args: dict[str, Any] = {"trace": LARGEST, "top": 0}
        while True:
            texts.append(text_of(await session.call_tool("summary", args)))
            cursor = json.loads(texts[-1])["next_cursor"]
            if cursor is None:
                texts.append(
                    text_of(await session.call_tool("advise", {"trace": LARGEST, "max_chars": 5_000}))
                )
                return texts
            args = {**args, "cursor": cursor}

    texts = run_session([corpus], work)
    expected = json.loads(cli("summary", corpus / LARGEST, "--top", "0", "--format", "json").out)
    assert len(json.dumps(expected)) > 20_000 and all(len(t) <= 20_000 for t in texts[:-1])
    assert sum(len(json.loads(t)["rows"]) for t in texts[:-1]) == len(expected["rows"])
    assert len(texts[-1]) <= 5_000


def test_paths_outside_the_roots_links_out_and_non_traces_are_refused(corpus: Path, tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    shutil.copy(corpus / "hta/trace_compare_base_base.json.gz", outside / "trace.json.gz")
    (root / "link.json.gz").symlink_to(outside / "trace.json.gz")
    (root / "notes.txt").write_text("not a trace\n", encoding="utf-8")
    shutil.copy(corpus / "hta/trace_compare_base_base.json.gz", root / "inside.json.gz")
    wanted = [
        ("summary", {"trace": str(outside / "trace.json.gz")}),
        ("summary", {"trace": "../outside/trace.json.gz"}),
        ("summary", {"trace": "link.json.gz"}),
        ("advise", {"trace": "notes.txt"}),
        ("diff", {"base": str(corpus / QWEN), "new": "link.json.gz"}),
        ("kernels", {"trace": "notes.txt"}),
        ("kernels", {"trace": "inside.json.gz", "metrics": "notes.txt"}),
        ("summary", {"trace": "x.json", "top": "all"}),
        ("summary", {"trace": "x.json", "output": "/tmp/x"}),
        ("nope", {"trace": "x.json"}),
    ]
    results = calls([root], wanted)
    texts = [text_of(r) for r in results]
    assert all(r.is_error for r in results), texts
    assert all(t.startswith("opscope: error: ") and "\n" not in t for t in texts)
    assert "outside the server's roots" in texts[0] and "outside the server's roots" in texts[1]
    assert "symbolic link leading outside" in texts[2]
    assert "not a trace" in texts[3]
    assert "outside the server's roots" in texts[4]  # the corpus is not a root of this server
    assert "notes.txt: not a trace" in texts[5]
    assert "notes.txt: not an Nsight Compute CSV" in texts[6]
    assert "top" in texts[7] and "output" in texts[8] and "no tool named 'nope'" in texts[9]
    assert sorted(p.name for p in root.iterdir()) == [
        "inside.json.gz",
        "link.json.gz",
        "notes.txt",
    ]  # no writes


def test_the_same_call_gives_the_same_bytes(corpus: Path) -> None:
    wanted = [("advise", {"trace": QWEN, "max_chars": 4_000}), ("brief", {"trace": QWEN})]
    first = [text_of(r) for r in calls([corpus], wanted + wanted)]
    again = [text_of(r) for r in calls([corpus], wanted)]
    assert first[:2] == first[2:] == again
    assert json.loads(first[0])["truncated"] is True


def test_a_failing_command_is_its_one_line_error(corpus: Path) -> None:
    results = calls(
        [corpus],
        [("critical_path", {"trace": QWEN, "what_if": ["gemm"]}), ("steps", {"trace": QWEN, "steps": "99"})],
    )
    texts = [text_of(r) for r in results]
    assert all(r.is_error for r in results)
    assert texts[0] == "opscope: error: --what-if: expected 'REGEX:FACTOR' with a factor >= 0, got 'gemm'"
    assert texts[1].startswith("opscope: error: ") and "\n" not in texts[1]


def test_trace_text_reaches_the_client_as_data(cli, tmp_path: Path) -> None:
    from handmade_traces import write
    from test_hostile_names import (
        CLEAR,
        RAW,
        hostile_doc,
    )  # HAND-MADE: names with control sequences, markup, bidi

    root = tmp_path / "root"
    root.mkdir()
    trace = write(root / "hostile\x1b[2J.json", hostile_doc())
    wanted = [
        ("summary", {"trace": trace.name}),
        ("brief", {"trace": trace.name}),
        ("summary", {"trace": "missing\x1b]0;title\x07.json"}),
    ]
    texts = [text_of(r) for r in calls([root], wanted)]
    assert not any(RAW.search(t) for t in texts)
    assert json.loads(texts[0]) == json.loads(cli("summary", trace, "--format", "json").out)
    assert "\\u202e" in texts[0]  # the right-to-left override written as an escape, as --format json has it
    assert CLEAR in [row["name"] for row in json.loads(texts[0])["rows"]]  # and exact once parsed
    assert json.loads(texts[1])["schema"] == "opscope.brief/1"
    assert texts[2] == "opscope: error: missing\\x1b]0;title\\x07.json: no such file or folder"


def test_the_validity_banner_opens_each_answer(tmp_path: Path) -> None:
    """Issue 52: an answer on a trace whose checks fire starts with the banner lines, on every page."""
    import gzip

    from test_validity import QWEN_MI300, stretched

    root = tmp_path / "root"
    root.mkdir()
    with gzip.open(corpus_path(QWEN_MI300), "rt", encoding="utf-8") as handle:
        doc = json.load(handle)
    stretched(doc, 7, by_us=2_000.0)
    (root / "stretched.json").write_text(json.dumps(doc), encoding="utf-8")
    wanted = [
        ("summary", {"trace": "stretched.json"}),
        ("brief", {"trace": "stretched.json"}),
        ("summary", {"trace": "stretched.json", "max_chars": 3_000}),
    ]
    for text in (text_of(r) for r in calls([root], wanted)):
        answer = json.loads(text)
        assert list(answer)[:2] == ["schema", "validity_banners"]
        assert answer["validity_banners"][0].startswith("ERROR stream_overlap: 7 kernels")
        if not answer.get("truncated"):  # a cut answer's checks are rows, on the page they fall on
            assert answer["validity"][0]["check"] == "stream_overlap"
