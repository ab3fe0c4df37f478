"""One tool call of `opscope mcp`, apart from the protocol: check the arguments against the tool's JSON schema,
check every path against the roots, run the command (a `Runner`: the CLI in-process, cli/mcp.py), and bound
the answer (`bounds.py`).

A cursor names the call it continues: a digest of the command line and of the size and modification time of
every file it reads, and the row to start from. A cursor from another call, or from before the trace changed,
is refused. The last few payloads are kept in memory, so that paging through an answer runs the analysis once.
Calls run one at a time (the CLI writes its answer to a redirected standard output).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from opscope.errors import UsageError
from opscope.serve.bounds import bounded, encode
from opscope.serve.roots import Roots
from opscope.serve.tools import BY_NAME, MAX_CHARS, Tool

Runner = Callable[[Sequence[str]], dict[str, Any]]  # a command line -> its `--format json` payload
KEPT = 8  # payloads kept for the pages that follow


class Calls:
    def __init__(self, roots: Roots, run: Runner, tools: Mapping[str, Tool] = BY_NAME) -> None:
        self.roots, self.run, self.tools = roots, run, tools
        self._lock = threading.Lock()
        self._kept: OrderedDict[str, dict[str, Any]] = OrderedDict()

    def call(self, name: str, arguments: Mapping[str, Any] | None) -> str:
        """The answer (JSON text under `max_chars`) of tool `name`; raises `OpscopeError` with one line."""
        tool = self.tools.get(name)
        if tool is None:
            raise UsageError(f"no tool named {name!r} (the tools: {', '.join(self.tools)})")
        args = dict(arguments or {})
        validate(tool, args)
        files = [self.roots.file(args[n], tool.kind) for n in tool.inputs]
        for option in tool.options:
            if option.path is not None and args.get(option.name) is not None:
                found = self.roots.file(args[option.name], option.path)
                files.append(found)
                args[option.name] = str(found)
        argv = tool.argv([str(f) for f in files[: len(tool.inputs)]], args)
        key = digest(argv, files)
        offset = cursor_offset(args.get("cursor"), key)
        with self._lock:
            payload = self._kept.get(key)
            if payload is None:
                payload = self.run(argv)
                self._kept[key] = payload
                while len(self._kept) > KEPT:
                    self._kept.popitem(last=False)
            self._kept.move_to_end(key)
        text, _ = bounded(payload, int(args.get("max_chars", MAX_CHARS)), offset, lambda o: f"{key}.{o}")
        return text


def validate(tool: Tool, arguments: Mapping[str, Any]) -> None:
    """Check the arguments against the tool's schema (JSON Schema 2020-12); the first problem, in one line."""
    import jsonschema  # comes with the MCP SDK (`opscope[mcp]`)

    validator = jsonschema.Draft202012Validator(tool.input_schema())
    error = jsonschema.exceptions.best_match(validator.iter_errors(dict(arguments)))
    if error is not None:
        where = ".".join(str(p) for p in error.absolute_path)
        message = error.message if len(error.message) <= 300 else error.message[:300] + "..."
        raise UsageError(f"{tool.name}: {where + ': ' if where else ''}{message}")


def digest(argv: Sequence[str], files: Sequence[Path]) -> str:
    """16 hex digits naming a call: its command line and the size and modification time of each file read."""
    identity = []
    for path in files:
        info = path.stat()
        identity.append([str(path), info.st_size, info.st_mtime_ns])
    return hashlib.sha256(encode([list(argv), identity]).encode()).hexdigest()[:16]


def cursor_offset(cursor: str | None, key: str) -> int:
    """The row a cursor continues from; 0 without one."""
    if cursor is None:
        return 0
    called, _, offset = cursor.partition(".")
    if called != key or not (offset.isascii() and offset.isdigit()):
        raise UsageError(
            "cursor: not from a call with these arguments, or the trace changed since; call again without it"
        )
    return int(offset)
