"""`opscope` entry point: parse arguments, run one subcommand, turn errors into exit codes (only here)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from types import ModuleType

from opscope._version import __version__
from opscope.cli import (
    analyze,
    bench,
    demo,
    diff,
    export,
    formats,
    kernels,
    ops,
    ranks,
    report,
    run,
    steps,
    summary,
    tree,
)
from opscope.errors import OpscopeError

# Each subcommand module has NAME, HELP, prepare_parser(parser) and run(args) -> int.
COMMANDS: list[ModuleType] = [summary, analyze, kernels, ops, tree, steps, diff, ranks, report, export, run, bench,
                              demo, formats]


class _OneLine(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return f"opscope: {record.levelname.lower()}: {record.getMessage()}"


def _setup_logging(quiet: bool) -> None:
    logger = logging.getLogger("opscope")
    logger.handlers.clear()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_OneLine())
    logger.addHandler(handler)
    logger.setLevel(logging.ERROR if quiet else logging.WARNING)
    logger.propagate = False


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="opscope", description="Where does the GPU time go? Operator by "
                                     "operator, kernel by kernel.")
    parser.add_argument("--version", action="version", version=f"opscope {__version__}")
    parser.add_argument("-q", "--quiet", action="store_true", help="no warnings on standard error")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in COMMANDS:
        child = sub.add_parser(module.NAME, help=module.HELP, description=module.HELP)
        module.prepare_parser(child)
        child.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse prints its own one-line usage error
        return int(exc.code or 0)
    _setup_logging(getattr(args, "quiet", False))
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    try:
        return int(args._run(args))
    except OpscopeError as exc:
        print(f"opscope: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("opscope: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # a bug: still one line, with a way to get the traceback
        if os.environ.get("OPSCOPE_DEBUG"):
            raise
        print(f"opscope: internal error: {type(exc).__name__}: {exc} (set OPSCOPE_DEBUG=1 for the traceback)",
              file=sys.stderr)
        return 3


def entry() -> None:
    sys.exit(main())
