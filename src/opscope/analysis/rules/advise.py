"""The rules' entry point: `advise(trace)` is `analyze` (overview.py, which composes the rooms' results) followed
by the advice rules over that result, sharing one link table and one GPU activity; on a trace with Python stacks
each evidence item is then given the frame of the user's code that launched it (`findings.with_frames`). The rules read results; no
result module imports the rules back. Definitions: docs/advice.md."""

from __future__ import annotations

from dataclasses import replace

from opscope.analysis.attribution.lines import launch_sites
from opscope.analysis.base.linking import Linkage
from opscope.analysis.base.parallel import Beside
from opscope.analysis.efficiency.table import efficiency
from opscope.analysis.findings import evidence_names, with_frames
from opscope.analysis.kernels.gpu_arch import AMD
from opscope.analysis.overview import Analysis, AnalyzeOptions, analysis_of, prepare
from opscope.analysis.rules.context import RuleContext
from opscope.analysis.rules.efficiency import LOW_EFFICIENCY, low_efficiency_options
from opscope.analysis.rules.engine import evaluate
from opscope.analysis.rules.frameworks import framework_of, with_framework_advice
from opscope.analysis.rules.hardware import with_gpu_advice
from opscope.analysis.timeline.activity import Activity
from opscope.model.trace import Trace


def advise(
    trace: Trace,
    options: AnalyzeOptions | None = None,
    linkage: Linkage | None = None,
    activity: Activity | None = None,
) -> Analysis:
    """`analyze(trace, options)` with `Analysis.advice` filled by the advice rules (unless `options.advise` is
        false): thresholds from `options.rules`, predicted savings from the critical path with `options.predict`.
        `linkage` / `activity`: as `overview.prepare` takes them, when the caller already has them. The precision
    rules' advice names what the trace's GPU supports (rules/hardware.py)."""
    opts = options or AnalyzeOptions()
    linkage, act = prepare(trace, opts, linkage, activity)
    result = analysis_of(trace, opts, linkage, act)
    if not opts.advise:
        return result
    ctx = RuleContext(trace, result, linkage, act)

    # the efficiency table of the `low_efficiency` rule (the advice's largest stage) beside the other rules,
    # when a thread is free (not in the report, whose trees and critical path run beside its advice): the rule
    # reads it through `Trace.derived`, waiting for it if it is not done (issue 25: x4 ~-40 ms, x64 ~-0.3 s,
    # peak +~100 MB); only when the checks run, not when a first command's are read back
    def early_efficiency() -> None:
        if opts.rules is None or LOW_EFFICIENCY not in opts.rules.disabled:
            Beside(
                lambda: efficiency(trace, low_efficiency_options(opts.devices, opts.streams), linkage),
                name="opscope-efficiency",
                spare_only=True,
            )

    advice = with_gpu_advice(evaluate(ctx, opts.rules, opts.predict, early_efficiency), ctx.gpu)
    advice = with_framework_advice(advice, framework_of(trace), ctx.gpu.vendor == AMD)
    return replace(result, advice=with_frames(advice, *launch_sites(trace, linkage, *evidence_names(advice))))
