"""`opscope diff BASE NEW`: what changed between two traces, biggest first, with optional regression gates."""

from __future__ import annotations

import argparse
import logging
import re
import sys
from dataclasses import replace
from typing import TYPE_CHECKING

from opscope.cli.common import add_cache_args, add_html_arg, add_output_args, emit, render_options, write_html
from opscope.cli.fanout import add_parallel_args, file_tasks, run_tasks
from opscope.errors import GateFailed, UsageError

if TYPE_CHECKING:
    from opscope.analysis.compare.gates import Gate
    from opscope.analysis.compare.hardware import HardwareDiff
    from opscope.analysis.compare.profile import TraceProfile
    from opscope.analysis.findings import Advice

NAME = "diff"
log = logging.getLogger("opscope")
WIDE = 140  # terminal width from which the tables also show means per call
HTML_ROWS = 5_000  # rows per table in the --html page: 300,000 distinct kernels made a 76 MB page


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("base", help="the trace before (file, or a folder: its newest trace)")
    parser.add_argument("new", help="the trace after")
    add_cache_args(parser)
    parser.add_argument(
        "--per-step",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="divide totals by each trace's step count (default: when both have ProfilerStep markers)",
    )
    parser.add_argument("--by-shape", action="store_true", help="match operators by name and input shapes")
    parser.add_argument(
        "--match",
        choices=("kernels", "ops"),
        default=None,
        help="ops: also match the work operator by operator and input shapes across two GPUs (kernel names "
        "differ across vendors), with each side's kernels and percent of its own peak; default: ops when the "
        "two traces ran on different GPUs",
    )
    parser.add_argument(
        "--min-delta",
        default=None,
        metavar="TIME|PCT",
        help="hide rows changing less than this (50us, 1ms, or 2%% of BASE's step time)",
    )
    parser.add_argument("--top", type=int, default=30, help="rows per table (0 = all; default 30)")
    parser.add_argument(
        "--key-op",
        action="append",
        default=None,
        metavar="REGEX",
        help="headline row for the ops matching REGEX (repeatable; default: BASE's top 3 ops)",
    )
    parser.add_argument(
        "--fail-above",
        default=None,
        metavar="PCT",
        help="exit 1 if GPU time (per step) grew by more than PCT percent",
    )
    parser.add_argument(
        "--fail-kernel",
        action="append",
        default=[],
        metavar="REGEX:PCT",
        help="exit 1 if the kernels matching REGEX grew by more than PCT percent (repeatable)",
    )
    parser.add_argument(
        "--fail-category",
        action="append",
        default=[],
        metavar="NAME:PCT",
        help="exit 1 if a kernel category's GPU time grew by more than PCT percent (repeatable)",
    )
    parser.add_argument(
        "--fail-memory",
        default=None,
        metavar="PCT",
        help="exit 1 if a device's peak allocated memory grew by more than PCT percent",
    )
    add_parallel_args(parser)
    add_output_args(parser)
    add_html_arg(parser)


def _gates(args: argparse.Namespace) -> tuple[Gate, ...]:
    from opscope.analysis.compare.gates import CATEGORY, GPU_TIME, KERNEL, Gate, parse_gate, parse_pct

    gates = []
    if args.fail_above is not None:
        gates.append(Gate(GPU_TIME, None, parse_pct(args.fail_above, "--fail-above")))
    gates.extend(parse_gate(text, KERNEL) for text in args.fail_kernel)
    gates.extend(parse_gate(text, CATEGORY) for text in args.fail_category)
    return tuple(gates)


def _width(args: argparse.Namespace) -> int:
    return render_options(args, args.output is None and sys.stdout.isatty()).width or 0


def _findings(
    base: Advice | None,
    base_devices: tuple[str, ...],
    new: Advice | None,
    new_devices: tuple[str, ...],
    profiles: tuple[TraceProfile, TraceProfile],
) -> dict[str, list[dict[str, object]]]:
    """The advice findings of BASE and NEW compared (fixed / new / remaining; docs/advice.md), each fixed or
    reduced one with its prediction against its realisation (issue 53): each trace's advice and device names,
    computed in its task beside its profile."""
    from opscope.analysis.compare.realised import realised
    from opscope.report.findings_diff import findings_changes, vendor

    checked = realised(profiles[0], profiles[1], base, new)
    return findings_changes(base, new, (vendor(base_devices), vendor(new_devices)), checked)


def _other_gpu(base: tuple[str, ...], new: tuple[str, ...]) -> bool:
    """Whether the traces ran on different GPUs: both name their devices (not a bare "device 0", which a trace
    without device properties gives) and the names differ."""
    named = [tuple(d for d in side if not re.fullmatch(r"(device|GPU) \d+", d)) for side in (base, new)]
    return all(named) and set(named[0]) != set(named[1])


def _across_hardware(args: argparse.Namespace) -> HardwareDiff:
    """The operators matched across the two GPUs (a second, warm read of each trace: only when asked for, or
    when the devices differ)."""
    from opscope.analysis.compare.hardware import hardware_diff
    from opscope.scale.memory_tasks import hardware_side_file

    base, new = run_tasks(hardware_side_file, file_tasks([args.base, args.new], args, args.by_shape), args)
    return hardware_diff(base, new)


def run(args: argparse.Namespace) -> int:
    from opscope.analysis.compare.diff import DiffOptions, diff_profiles, unmatched_key_ops
    from opscope.analysis.compare.gates import KERNEL, check_gates, parse_min_delta
    from opscope.cli.memory_diff import memory_diff
    from opscope.report.diff_view import DiffView, diff_data, diff_document
    from opscope.report.findings_diff import with_findings
    from opscope.report.hardware_view import hardware_data, with_hardware
    from opscope.scale.memory_tasks import profile_peaks_and_advice_file

    if args.top < 0:
        raise UsageError("--top must be 0 (all rows) or a positive number")
    gates = _gates(args)
    view = DiffView(
        top=args.top,
        min_delta=parse_min_delta(args.min_delta) if args.min_delta else None,
        means=args.format != "table" or args.wide or _width(args) >= WIDE,
    )
    options = DiffOptions(per_step=args.per_step, by_shape=args.by_shape, key_ops=tuple(args.key_op or ()))
    if args.jobs is None and args.scheduler is None:
        # one trace after the other: the memory of one trace's analysis, not of both at once (issue 57: the
        # 1 GB trace diffed side by side peaked at 1.6 GB; on the OWLv2 inference trace at 2.6x a summary).
        # --jobs 2 reads them side by side (~20% faster on two cores).
        args.jobs = 1
    (base, base_peaks, base_advice, base_devices), (new, new_peaks, new_advice, new_devices) = run_tasks(
        profile_peaks_and_advice_file, file_tasks([args.base, args.new], args, args.by_shape), args
    )  # one read each: the profile, the memory peaks and the advice of one trace share its link table
    diff = diff_profiles(base, new, options)
    memory = memory_diff(args, base_peaks, new_peaks)
    results = check_gates(diff, gates)
    unmatched = unmatched_key_ops(diff)
    if unmatched:
        raise UsageError(f"--key-op {unmatched[0]!r} matches no operator in either trace")
    for warning in diff.warnings:
        log.warning(warning)
    for (
        result
    ) in results:  # a typo must not disarm CI: a pattern that matches nothing is an error, not a pass
        if result.gate.target == KERNEL and result.matched == 0:
            raise UsageError(f"--fail-kernel {result.gate.pattern!r} matches no kernel in either trace")
    findings = _findings(base_advice, base_devices, new_advice, new_devices, (base, new))
    document = memory.add(
        with_findings(diff_document(diff, results, view, rows_first=args.format == "csv"), findings)
    )
    hardware = (
        _across_hardware(args)
        if args.match == "ops" or (args.match is None and _other_gpu(base_devices, new_devices))
        else None
    )
    if hardware is not None:
        document = with_hardware(document, hardware, args.top)
    emit(document, args)
    if args.html:  # the biggest changes (the waterfall's "other changes" bar sums the rest, the page says so)
        write_html(
            # the findings compared, as the terminal and JSON show them (issue 28: the page had none)
            {
                **diff_data(diff, results, replace(view, top=HTML_ROWS)),
                "findings": findings,
                "hardware": hardware_data(hardware, HTML_ROWS) if hardware is not None else None,
            },
            "diff",
            "opscope diff: NEW vs BASE",
            args.html,
            args,
        )
    tripped = [r.reason(diff.per_step) for r in results if r.tripped] + memory.tripped
    if tripped:
        raise GateFailed(f"regression gate failed: {'; '.join(tripped)}")
    return 0
