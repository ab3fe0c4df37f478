"""`opscope ncu FILE`: an Nsight Compute CSV export (or a rocprof-compute database) on its own: per-kernel
metrics, findings, ncu's rules."""

from __future__ import annotations

import argparse
from pathlib import Path

from opscope.cli.common import add_output_args, add_top_arg, check_outputs, check_top, emit
from opscope.errors import InputError

NAME = "ncu"


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "file",
        metavar="FILE",
        help="Nsight Compute CSV export (ncu --csv --page details, the default, or --page raw), or a "
        "rocprof-compute analysis database (rocprof-compute analyze --output-format db)",
    )
    parser.add_argument(
        "--by",
        choices=("kernel", "launch"),
        default="kernel",
        help="one row per kernel name (means over its launches, default) or per profiled launch",
    )
    add_top_arg(parser)
    parser.add_argument(
        "--filter", default=None, metavar="REGEX", help="only kernel names matching this regex"
    )
    add_output_args(parser)


def run(args: argparse.Namespace) -> int:
    from opscope.analysis.kernels.ncu_report import NcuOptions, ncu_report
    from opscope.ingest.ncu import read_ncu_csv
    from opscope.ingest.rocprof_compute import read_metrics, sniff
    from opscope.ingest.source import head_bytes
    from opscope.report.ncu_view import ncu_document

    check_top(args)
    path = Path(args.file)
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    check_outputs(args, path)
    metrics = (
        read_metrics(path, args.file) if sniff(head_bytes(path), path) else read_ncu_csv(path, args.file)
    )
    report = ncu_report(metrics, NcuOptions(by=args.by, top=args.top, name_filter=args.filter))
    emit(ncu_document(report), args)
    return 0
