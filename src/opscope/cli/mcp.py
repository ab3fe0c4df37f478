"""`opscope mcp`: serve opscope's commands to coding agents over the Model Context Protocol (stdio).

The tools, their schemas and the bounds are in `opscope.serve`; this module gives them the CLI itself as the
way to run a command: `command_json` runs `opscope COMMAND ... --format json` in-process, through `main`, and
returns the payload it printed, so that a tool answers exactly what the command prints (docs/mcp.md).
"""

from __future__ import annotations

import argparse
import io
import logging
import os
import re
from collections.abc import Sequence
from contextlib import redirect_stderr, redirect_stdout
from typing import Any

from opscope.errors import MissingDependency, OpscopeError
from opscope.extras import install_command

NAME = "mcp"
PREFIX = re.compile(r"^opscope(?: [\w-]+)?: (?:error: )?")  # `opscope: error: `, `opscope summary: error: `


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--root",
        action="append",
        default=None,
        metavar="DIR",
        help="serve only files under this folder (repeatable; default: the current folder); paths outside, "
        "and symbolic links leading out, are refused",
    )


class CommandFailed(OpscopeError):
    """The command a tool ran ended with an error: its one-line message, as the CLI printed it."""


def command_json(argv: Sequence[str]) -> dict[str, Any]:
    """The `--format json` payload `opscope ARGV` prints, run in-process (standard output and error captured)."""
    import msgspec

    from opscope.cli.main import main

    logger = logging.getLogger("opscope")
    handlers, level = list(logger.handlers), logger.level
    out, err = io.StringIO(), io.StringIO()
    try:
        with redirect_stdout(out), redirect_stderr(err):
            code = main(["-q", *argv])
    finally:  # `main` points the package's logger at the captured standard error: point it back
        logger.handlers[:], logger.level = handlers, level
    if code != 0:
        lines = [line for line in err.getvalue().splitlines() if line.strip()]
        raise CommandFailed(PREFIX.sub("", lines[-1]) if lines else f"exit code {code}")
    payload: dict[str, Any] = msgspec.json.decode(out.getvalue())
    return payload


def run(args: argparse.Namespace) -> int:
    try:
        import mcp  # noqa: F401  (the SDK: an optional extra)
    except ImportError:
        raise MissingDependency(f"opscope mcp needs the MCP SDK: {install_command('mcp')}") from None
    from opscope.serve.calls import Calls
    from opscope.serve.mcp_server import serve
    from opscope.serve.roots import Roots

    serve(Calls(Roots.of(args.root or [os.getcwd()]), command_json))
    return 0
