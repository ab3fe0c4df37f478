"""`opscope compile-check`: torch.compile regions, graph breaks, recompiles and fused kernels; CI gates."""

from __future__ import annotations

import argparse

from opscope.cli.common import add_input_args, add_output_args, add_top_arg, check_top, emit, load_trace

NAME = "compile-check"


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    add_input_args(parser)
    add_top_arg(parser, default=20)
    parser.add_argument(
        "--expect-fused",
        default=None,
        metavar="OP[,OP...]",
        help="exit 1 unless every listed op appears in some Inductor kernel (e.g. add,mul,silu)",
    )
    parser.add_argument(
        "--max-graph-breaks", type=int, default=None, metavar="N", help="exit 1 above N graph breaks"
    )
    parser.add_argument(
        "--max-recompiles", type=int, default=None, metavar="N", help="exit 1 above N recompiles"
    )
    add_output_args(parser, formats=("table", "json", "markdown"))


def run(args: argparse.Namespace) -> int:
    from opscope.analysis.compile.regions import compile_check, missing_fused
    from opscope.errors import UsageError
    from opscope.report.compile_view import compile_document

    check_top(args)
    for flag in ("max_graph_breaks", "max_recompiles"):
        if getattr(args, flag) is not None and getattr(args, flag) < 0:
            raise UsageError(f"--{flag.replace('_', '-')} must be 0 or more")
    result = compile_check(load_trace(args))
    violations = []
    if args.expect_fused:
        expected = tuple(op.strip() for op in args.expect_fused.split(",") if op.strip())
        missing = missing_fused(result, expected)
        if missing:
            violations.append(f"not fused by Inductor: {', '.join(missing)}")
    if args.max_graph_breaks is not None and result.graph_breaks is None:  # a gate never passes unchecked
        violations.append("graph breaks not recorded (CompiledFunction regions carry no frame id)")
    elif args.max_graph_breaks is not None and (result.graph_breaks or 0) > args.max_graph_breaks:
        violations.append(f"{result.graph_breaks} graph breaks > --max-graph-breaks {args.max_graph_breaks}")
    if args.max_recompiles is not None and result.recompiles > args.max_recompiles:
        violations.append(f"{result.recompiles} recompiles > --max-recompiles {args.max_recompiles}")
    emit(compile_document(result, violations, args.top), args)
    return 1 if violations else 0
