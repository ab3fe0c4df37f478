"""`opscope history ...`: one command whose subcommands keep a project's runs in a database and find regressions
(docs/history.md). Each subcommand's options and body live in `cli.history_commands` / `cli.history_check`."""

from __future__ import annotations

import argparse

NAME = "history"

SUBCOMMANDS: dict[str, str] = {
    "add": "add traces to the history (prints their run ids; a trace already there is not added twice)",
    "list": "list the runs, oldest first",
    "show": "one metric of a kernel / op / category / global figure over the runs, with a sparkline",
    "check": "compare the most recent runs with a baseline: exit 0 ok, 1 regression, 2 bad input",
    "prune": "delete all but the newest N runs",
    "export": "write every stored metric, with its run, to a Parquet file (for notebooks)",
    "report": "self-contained HTML page: trend charts over the runs, regressions marked",
}


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    from opscope.cli import history_check, history_commands
    from opscope.cli.common import add_subcommands

    for name, child in add_subcommands(parser, "history_command", SUBCOMMANDS):
        child.add_argument(
            "--db",
            default=None,
            metavar="PATH|URL",
            help="SQLite file or postgresql://user@host/db (default: $OPSCOPE_HISTORY, else "
            ".opscope/history.sqlite)",
        )
        module = history_check if name in ("check", "report") else history_commands
        getattr(module, f"prepare_{name}")(child)
        child.set_defaults(_history=getattr(module, f"run_{name}"))


def run(args: argparse.Namespace) -> int:
    return int(args._history(args))
