"""`opscope advise`: findings with evidence and advice, sorted by predicted saving; `--fail-on` for CI."""

from __future__ import annotations

import argparse

from opscope.cli.common import (
    add_input_args,
    add_output_args,
    add_selection_args,
    add_steps_arg,
    emit,
    load_trace,
)
from opscope.errors import UsageError

NAME = "advise"
LEVELS = ("info", "warn", "crit")


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    add_input_args(parser)
    add_selection_args(parser)
    add_steps_arg(parser)
    parser.add_argument(
        "--rules",
        default=None,
        metavar="FILE",
        help="TOML file of thresholds: [rules.<id>] threshold = N, enabled = false; [severity] crit, warn",
    )
    parser.add_argument(
        "--top", type=int, default=0, metavar="N", help="show the first N findings only (0: all)"
    )
    parser.add_argument(
        "--list-rules", action="store_true", help="list the rules and their thresholds, then exit"
    )
    parser.add_argument(
        "--fail-on",
        choices=("warn", "crit"),
        default=None,
        help="exit 1 when a finding of this severity or worse exists (for CI)",
    )
    add_output_args(parser, formats=("table", "json", "markdown", "csv"))


def run(args: argparse.Namespace) -> int:
    from opscope.analysis.overview import AnalyzeOptions
    from opscope.analysis.rules.advise import advise
    from opscope.analysis.rules.engine import load_config
    from opscope.report.advice_view import advise_document, rules_document

    config = load_config(args.rules) if args.rules else None
    if args.list_rules:
        emit(rules_document(config), args)
        return 0
    trace = load_trace(args)
    if args.top < 0:
        raise UsageError("--top must be 0 (all) or more")
    options = AnalyzeOptions(devices=args.device, streams=args.stream, steps=args.steps, rules=config)
    result = advise(trace, options)
    emit(advise_document(result, args.top), args)
    if args.fail_on and result.advice is not None:
        worst = result.advice.worst()
        if worst is not None and LEVELS.index(worst) >= LEVELS.index(args.fail_on):
            return 1
    return 0
