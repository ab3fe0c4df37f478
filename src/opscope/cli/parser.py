"""The argument parser of the CLI: argparse, with errors on one line.

argparse answers a bad option with its whole usage block (8 lines for `summary`) and then the error; the CLI
promises one line per error, so `OneLineParser.error` prints `opscope summary: error: MESSAGE (see
opscope summary --help)` and exits 2. Subparsers inherit the class from the top-level parser. The message
quotes what the user typed, through `visible`, like every other error message.
"""

from __future__ import annotations

import argparse
from typing import NoReturn

from opscope.untrusted import visible


class OneLineParser(argparse.ArgumentParser):
    # The subcommand of the command line being parsed (set by cli.main.build_parser): argparse reports an
    # unknown option of `opscope summary` from the top-level parser, whose help would not list it.
    help_for: str | None = None

    def error(self, message: str) -> NoReturn:
        where = self.help_for or self.prog
        self.exit(2, f"{self.prog}: error: {visible(message)} (see {where} --help)\n")
