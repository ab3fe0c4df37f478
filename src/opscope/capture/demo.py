"""`opscope demo`: the main job end to end on a built-in example. A tiny diffusion-style denoiser
(`demo_model.py`) runs a short denoising loop; only the first 3 steps are profiled, recording shapes, memory and
Python stacks (so that the report's efficiency, memory and source views have data, on a CPU too); the trace is
summarised (GPU kernels on CUDA, CPU operators on the CPU) and a short diagnosis is derived from it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opscope.analysis.attribution.cpu_ops import cpu_op_table
from opscope.analysis.base.linking import link
from opscope.analysis.base.windows import step_windows
from opscope.analysis.findings import Advice
from opscope.analysis.kernels.summary import SummaryOptions, kernel_summary
from opscope.analysis.overview import AnalyzeOptions
from opscope.analysis.rules.advise import advise
from opscope.capture._torch import describe_device, pick_device, require_torch, synchronize
from opscope.capture.demo_model import build_denoiser, denoise
from opscope.capture.profiler import annotate, profile
from opscope.capture.summary import CaptureSummary, summarize, utilization
from opscope.errors import UsageError
from opscope.loading import load

SLOW_FIRST_STEP = 1.5  # step 0 at least this many times the later steps' mean: call it warm-up cost
IDLE_RULES = ("host_bound", "low_utilization_windows", "gpu_gaps")  # the rules that state the GPU's idle time
BUSY_LOW = 0.5  # GPU busy below this share of the profiled steps: the host is the bottleneck


@dataclass(frozen=True)
class DemoResult:
    device: str
    total_steps: int
    profiled_steps: int
    latent_shape: tuple[int, ...]
    seconds: float
    summary: CaptureSummary
    step_ns: tuple[int, ...]  # duration of each profiled step (ProfilerStep markers)
    busy: float | None  # GPU busy (GPU run) or CPU-operator busy (CPU run) share of the profiled steps
    diagnosis: tuple[str, ...]
    report_path: str | None = None  # the HTML report, when the caller (the CLI) writes one


def diagnose(
    gpu: bool,
    shares: Sequence[tuple[str, float]],
    step_ns: Sequence[int],
    busy: float | None,
    advice: Advice | None = None,
) -> list[str]:
    """Plain-language findings from the profiled steps: first the advice rules' findings (analysis/rules/, the
    same engine and the same findings as `opscope advise`, on every run), then only the lines no rule states:
    the largest item (context for the findings), the first step's warm-up cost (no rule compares steps), and
    on a CPU-only run the CPU-operator busy share and the convolution hint (the rules read GPU activity, so
    they have nothing to say about CPU operators). The GPU busy share is left to the rules (`host_bound`,
    `low_utilization_windows`, `gpu_gaps` say it with its cause) when one of them is among the findings; when
    none is (their time is explained by other findings, as on an H200 whose first profiled step held 700 ms of
    first-call costs), a line says it. `shares`: (name, share of GPU time or of CPU-operator self time), largest
    first."""
    unit = "GPU time" if gpu else "CPU operator self time"
    # the idle time said once: by the first idle-time finding (the largest saving); the others it overlaps
    # stay in `opscope advise`
    idle_said = next((f.id for f in (advice.findings if advice else ()) if f.id in IDLE_RULES), None)
    findings = [
        f"[{f.severity}] {f.id}: {f.title} (saving about {(f.predicted_saving_ns or 0) / 1e6:.2f} ms). "
        f"{f.advice}"
        for f in (advice.findings if advice else ())
        if f.id not in IDLE_RULES or f.id == idle_said
    ]
    if shares:
        name, share = shares[0]
        top3 = sum(s for _, s in shares[:3])
        findings.append(
            f"{name} is the largest item: {share * 100:.1f}% of {unit} (top 3: {top3 * 100:.1f}%)."
        )
        conv = sum(s for n, s in shares if "conv" in n.lower())
        if conv >= 0.25 and not gpu:
            findings.append(
                f"Convolutions take {conv * 100:.1f}% of {unit}: channels_last and bf16 autocast are the "
                "usual levers; measure them with `opscope bench`."
            )
    if len(step_ns) >= 2:
        later = sum(step_ns[1:]) / len(step_ns[1:])
        if later and step_ns[0] >= SLOW_FIRST_STEP * later:
            findings.append(
                f"Step 0 took {step_ns[0] / 1e6:.1f} ms vs {later / 1e6:.1f} ms for the later profiled "
                f"steps ({step_ns[0] / later:.1f}x): first-call costs (allocation, algorithm selection, "
                "lazy init). Profile steady state with opscope.profile(wait=1, warmup=1, active=3)."
            )
    said = {f.id for f in advice.findings} if advice else set()
    if busy is not None and gpu and not said & set(IDLE_RULES):
        line = f"The GPU was busy {busy * 100:.1f}% of the profiled step time"
        if busy >= BUSY_LOW:
            line += "."
        elif advice and any(f.id in IDLE_RULES for f in advice.withheld):
            line += ": it mostly waits for the host (the idle-time rules fired; the findings above explain their time)."
        else:
            line += ": it mostly waits for the host."
        findings.append(line)
    if busy is not None and not gpu:
        findings.append(
            f"At least one CPU operator was running {busy * 100:.1f}% of the profiled step time; the "
            "rest is Python and framework work between operators."
        )
    return findings


def run_demo(
    device: str | None = None,
    total_steps: int = 10,
    profiled_steps: int = 3,
    size: int = 32,
    log_dir: str | None = None,
    top: int = 15,
) -> DemoResult:
    torch = require_torch()
    if total_steps < profiled_steps or profiled_steps < 1 or size < 8 or size % 2:
        raise UsageError("demo needs 1 <= profiled steps <= total steps and an even latent size >= 8")
    chosen = pick_device(device)
    model = build_denoiser().to(chosen)
    latents = torch.randn(1, 4, size, size, generator=torch.Generator().manual_seed(0)).to(chosen)

    def unet(x: Any, t: Any) -> Any:
        with annotate("unet"):
            return model(x, t)

    activities = ("cpu", "cuda") if chosen.type == "cuda" else ("cpu",)
    start = time.perf_counter()
    with profile(
        steps=profiled_steps,
        record_shapes=True,
        profile_memory=True,
        with_stack=True,
        activities=activities,
        log_dir=log_dir,
    ) as prof:

        def on_step(_: int) -> None:
            synchronize(chosen)  # each step window then holds its own GPU work
            prof.step()

        denoise(unet, latents, total_steps, on_step=on_step)
    seconds = time.perf_counter() - start
    if prof.trace_path is None:
        raise UsageError("the demo wrote no trace")
    return analyse_capture(
        prof.trace_path,
        describe_device(chosen),
        total_steps,
        profiled_steps,
        tuple(latents.shape),
        seconds,
        top,
    )


def analyse_capture(
    trace_path: Path,
    device: str,
    total_steps: int,
    profiled_steps: int,
    latent_shape: tuple[int, ...],
    seconds: float,
    top: int = 15,
) -> DemoResult:
    """The demo's second half, on the trace its capture wrote: the summary, the step times, the busy share, the
    advice rules and the diagnosis (separate so that a demo trace recorded on a GPU can be analysed without
    one)."""
    trace = load(trace_path)
    linkage = link(trace)
    windows = step_windows(trace)
    kernels = kernel_summary(trace, SummaryOptions(top=0))
    gpu = kernels.gpu_calls > 0
    if gpu:
        shares = [(r.name, r.share) for r in kernels.rows]
    else:
        shares = [(r.name, r.share) for r in cpu_op_table(trace, top=0, linkage=linkage).rows]
    busy = utilization(trace, gpu, linkage)
    advice = advise(trace, AnalyzeOptions(), linkage).advice  # the rule engine, on every run
    step_ns = tuple(w.dur_ns for w in windows if w.step is not None)
    return DemoResult(
        device=device,
        total_steps=total_steps,
        profiled_steps=profiled_steps,
        latent_shape=latent_shape,
        seconds=seconds,
        summary=summarize(trace_path, device=device, top=top),
        step_ns=step_ns,
        busy=busy,
        diagnosis=tuple(diagnose(gpu, shares, step_ns, busy, advice)),
    )
