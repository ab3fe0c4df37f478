"""The argument parser of the CLI: argparse, with errors on one line, and the grouped command list of --help.

argparse answers a bad option with its whole usage block (8 lines for `summary`) and then the error; the CLI
promises one line per error, so `OneLineParser.error` prints `opscope summary: error: MESSAGE (see
opscope summary --help)` and exits 2. Subparsers inherit the class from the top-level parser. The message
quotes what the user typed, through `visible`, like every other error message.
"""

from __future__ import annotations

import argparse
import shutil
import textwrap
from collections.abc import Mapping, Sequence
from typing import NoReturn

from opscope.untrusted import visible


class OneLineParser(argparse.ArgumentParser):
    # The subcommand of the command line being parsed (set by cli.main.build_parser): argparse reports an
    # unknown option of `opscope summary` from the top-level parser, whose help would not list it.
    help_for: str | None = None

    def error(self, message: str) -> NoReturn:
        where = self.help_for or self.prog
        self.exit(2, f"{self.prog}: error: {visible(message)} (see {where} --help)\n")


def grouped_commands(
    commands: Mapping[str, str],
    group_of: Mapping[str, str],
    titles: Mapping[str, str],
    examples: Sequence[tuple[str, str]],
    width: int | None = None,
) -> str:
    """The commands under their group titles (groups in `titles` order, commands in `commands` order), then the
    examples, wrapped to `width` (default: the terminal's, less 2, as argparse does). A command without a group
    is listed last, under "other", rather than hidden."""
    if width is None:
        width = shutil.get_terminal_size().columns - 2
    keys = [*titles, *(["other"] if any(name not in group_of for name in commands) else [])]
    column = 2 + max(len(name) for name in commands) + 2
    blocks = []
    for key in keys:
        rows = [(name, commands[name]) for name in commands if group_of.get(name, "other") == key]
        if rows:
            blocks.append(f"{titles.get(key, key)}:\n" + _rows(rows, column, width))
    example_column = 2 + max(len(command) for command, _ in examples) + 2
    blocks.append("examples:\n" + _rows(examples, example_column, width))
    return "\n\n".join(blocks)


def _rows(rows: Sequence[tuple[str, str]], column: int, width: int) -> str:
    out = []
    for name, text in rows:
        lines = textwrap.wrap(text, max(width - column, 30)) or [""]
        out += [f"  {name}".ljust(column) + lines[0], *(" " * column + line for line in lines[1:])]
    return "\n".join(out)
