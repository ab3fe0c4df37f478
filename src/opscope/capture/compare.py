"""`compare_strategies` (and `opscope bench`): a baseline and named variants of a model over batch sizes.

For each batch size, `setup(batch_size) -> (model, inputs)` builds the model and example inputs once; the baseline
and every variant run the same weights (each variant on its own copy). Per variant: (a) its outputs are checked
against the baseline's with dtype-dependent tolerances (`strategies.py`); (b) end-to-end latency of one forward
pass (inference, `torch.no_grad`) is timed `repeats` times after `warmup` calls; (c) `trace_steps` more calls are
profiled with `opscope.profile` and the trace gives the key operator's time per step (the top kernel by total
time on a GPU trace, the top CPU operator by self time on a CPU trace) and utilization (`summary.utilization`,
the busy time of `opscope steps`).
Before the first measurement, a warm-up pass runs the baseline through the same calls, untimed and with no trace saved
(`_warm_up`), so the baseline is not measured cold while the variants after it run warm.
A variant that fails (say torch.compile without a compiler) is reported with its error; the others still run.
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import importlib.util
import math
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opscope.analysis.attribution.cpu_ops import cpu_op_table
from opscope.analysis.base.linking import link
from opscope.analysis.base.windows import step_windows
from opscope.analysis.kernels.summary import SummaryOptions, kernel_summary
from opscope.capture import export
from opscope.capture._torch import describe_device, pick_device, require_torch, synchronize
from opscope.capture.profiler import Profile, ProfileOptions, profile
from opscope.capture.strategies import (
    BASELINE,
    Strategy,
    compute_dtype,
    default_variants,
    map_tensors,
    resolve,
    tensors,
    tf32_enabled,
    tolerance,
)
from opscope.capture.summary import utilization
from opscope.capture.timing import Spread, time_call, timing_method
from opscope.errors import InputError, UsageError
from opscope.loading import load
from opscope.model.trace import Trace

GPU_BUSY, CPU_OP_BUSY = "gpu_busy", "cpu_op_busy"


@dataclass(frozen=True)
class Accuracy:
    compute_dtype: str
    rtol: float
    atol: float  # fraction of the baseline output's largest magnitude
    max_abs_error: float
    max_rel_error: float  # max_abs_error / max |baseline|
    match: bool
    problem: str | None = None  # shape or count mismatch


@dataclass(frozen=True)
class TraceFigures:
    key_op: str | None
    key_op_ns: float | None  # per profiled step
    utilization: float | None  # busy / window, 0..1
    metric: str  # GPU_BUSY or CPU_OP_BUSY
    steps: int


@dataclass(frozen=True)
class VariantRun:
    variant: str
    batch_size: int
    latency_s: tuple[float, ...] = ()
    figures: TraceFigures | None = None
    accuracy: Accuracy | None = None  # None for the baseline
    trace_path: str | None = None
    error: str | None = None

    @property
    def latency(self) -> Spread | None:
        return Spread.of(self.latency_s) if self.latency_s else None


@dataclass(frozen=True)
class StrategyComparison:
    device: str
    timing: str
    variants: tuple[str, ...]  # the baseline first
    descriptions: tuple[str, ...]
    batch_sizes: tuple[int, ...]
    repeats: int
    warmup: int
    trace_steps: int
    runs: tuple[VariantRun, ...]

    def run(self, variant: str, batch_size: int) -> VariantRun | None:
        return next((r for r in self.runs if r.variant == variant and r.batch_size == batch_size), None)


def trace_figures(trace: Trace) -> TraceFigures:
    """Key operator time per step and utilization of one captured trace (see the module doc)."""
    steps = sum(1 for w in step_windows(trace) if w.step is not None) or 1
    kernels = kernel_summary(trace, SummaryOptions(top=1))
    linkage = link(trace)
    name: str | None = None
    key_ns = 0.0
    if kernels.gpu_calls:
        name, key_ns, metric = kernels.rows[0].name, float(kernels.rows[0].total_ns), GPU_BUSY
    else:
        ops = cpu_op_table(trace, top=1, linkage=linkage)
        if ops.rows:
            name, key_ns = ops.rows[0].name, float(ops.rows[0].self_ns)
        metric = CPU_OP_BUSY
    return TraceFigures(
        key_op=name,
        key_op_ns=key_ns / steps if name else None,
        utilization=utilization(trace, bool(kernels.gpu_calls), linkage),
        metric=metric,
        steps=steps,
    )


def check_outputs(strategy: Strategy, baseline: Any, output: Any, autocast: str | None) -> Accuracy:
    torch = require_torch()
    expected, got = tensors(baseline), tensors(output)
    floating = [t for t in got if t.is_floating_point()]
    dtype = compute_dtype(
        str(floating[0].dtype).replace("torch.", "") if floating else "float32",
        autocast,
        bool(floating) and floating[0].is_cuda,
        tf32_enabled(torch),
    )
    rtol, atol = tolerance(strategy, dtype)
    if len(expected) != len(got) or any(e.shape != g.shape for e, g in zip(expected, got, strict=True)):
        problem = (
            f"outputs differ in number or shape ({[tuple(t.shape) for t in got]} vs baseline "
            f"{[tuple(t.shape) for t in expected]})"
        )
        return Accuracy(dtype, rtol, atol, math.inf, math.inf, False, problem)
    pairs = [
        (e.detach().double().cpu(), g.detach().double().cpu()) for e, g in zip(expected, got, strict=True)
    ]
    scale = max((float(e.abs().max()) for e, _ in pairs if e.numel()), default=0.0)
    max_abs, ok = 0.0, True
    for e, g in pairs:
        if not e.numel():
            continue
        diff = (g - e).abs()
        diff = torch.where(
            torch.isnan(diff) & ~(torch.isnan(e) & torch.isnan(g)), math.inf, diff.nan_to_num(0.0)
        )
        max_abs = max(max_abs, float(diff.max()))
        ok = ok and bool((diff <= atol * scale + rtol * e.abs()).all())
    return Accuracy(dtype, rtol, atol, max_abs, max_abs / scale if scale else max_abs, ok)


def _invoke(model: Any, inputs: Any) -> Any:
    if isinstance(inputs, Mapping):
        return model(**inputs)
    if isinstance(inputs, (tuple, list)):
        return model(*inputs)
    return model(inputs)


def _runner(strategy: Strategy | None, model: Any, inputs: Any, device: Any) -> Callable[[], Any]:
    torch = require_torch()
    target = model
    if strategy is not None and strategy.transform is not None:
        target = strategy.transform(copy.deepcopy(model))
    args = map_tensors(inputs, strategy.inputs) if strategy is not None and strategy.inputs else inputs
    autocast = strategy.autocast if strategy is not None else None

    def call() -> Any:
        cast = (
            torch.autocast(device.type, dtype=getattr(torch, autocast))
            if autocast
            else contextlib.nullcontext()
        )
        with torch.no_grad(), cast:
            return _invoke(target, args)

    return call


def _measure(
    name: str, call: Callable[[], Any], batch: int, device: Any, settings: dict[str, Any], folder: Path
) -> tuple[VariantRun, Any]:
    output = call()  # the first call (compiles under torch.compile): a warm-up too
    for _ in range(settings["warmup"]):
        call()
    samples = tuple(time_call(call, device) for _ in range(settings["repeats"]))
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)
    activities = ("cpu", "cuda") if device.type == "cuda" else ("cpu",)
    with profile(
        steps=settings["trace_steps"], activities=activities, log_dir=str(folder / f"{safe}-bs{batch}")
    ) as prof:
        for _ in range(settings["trace_steps"]):
            call()
            synchronize(device)  # each step window then holds its own GPU work
            prof.step()
    path = prof.trace_path
    figures = trace_figures(load(path)) if path is not None else None
    return VariantRun(name, batch, samples, figures, None, str(path) if path else None), output


def _warm_up(call: Callable[[], Any], device: Any, settings: dict[str, Any]) -> None:
    """The warm-up pass before the first variant: the same calls `_measure` makes (the first call, the warm-up
    calls, one profiled step), with nothing timed and no trace written. One-time costs of the process (CUDA
    context and library handles, kernel loading and autotuning, the profiler library starting up) then land here
    rather than in the baseline's figures, which every variant is compared with."""
    for _ in range(1 + settings["warmup"]):
        call()
    synchronize(device)
    activities = ("cpu", "cuda") if device.type == "cuda" else ("cpu",)
    prof = Profile(ProfileOptions(activities=activities, save=False))
    prof.log_warnings = False
    with prof:
        call()
        synchronize(device)


def _count(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise UsageError(f"{name} must be a whole number >= {minimum}, got {value!r}")
    return value


def compare_strategies(
    setup: Callable[[int], tuple[Any, Any]],
    variants: Mapping[str, Any] | Sequence[Any] | None = None,
    batch_sizes: Sequence[int] = (1,),
    *,
    repeats: int = 5,
    warmup: int = 2,
    trace_steps: int = 3,
    device: str | None = None,
    log_dir: str | None = None,
) -> StrategyComparison:
    """Run the baseline and each variant of `setup(batch_size) -> (model, inputs)` at each batch size."""
    torch = require_torch()
    chosen = pick_device(device)
    strategies = resolve(variants if variants is not None else default_variants(chosen.type))
    sizes = tuple(_count("batch size", b, 1) for b in batch_sizes)
    if not sizes:
        raise UsageError("give at least one batch size")
    settings = {
        "repeats": _count("repeats", repeats, 1),
        "warmup": _count("warmup", warmup, 0),
        "trace_steps": _count("trace_steps", trace_steps, 1),
    }
    folder = export.log_dir(log_dir) / "bench"
    runs: list[VariantRun] = []
    for batch in sizes:
        built = setup(batch)
        if not (isinstance(built, tuple) and len(built) == 2):
            raise UsageError(f"setup({batch}) must return (model, inputs), got {type(built).__name__}")
        model, inputs = built
        if isinstance(model, torch.nn.Module):
            model = model.to(chosen).eval()
        inputs = map_tensors(inputs, lambda t: t.to(chosen))
        try:
            if batch == sizes[0]:
                _warm_up(_runner(None, model, inputs, chosen), chosen, settings)
            base_run, expected = _measure(
                BASELINE, _runner(None, model, inputs, chosen), batch, chosen, settings, folder
            )
        except Exception as exc:
            raise UsageError(
                f"the baseline failed at batch size {batch}: {type(exc).__name__}: {exc}"
            ) from None
        runs.append(base_run)
        for strategy in strategies:
            try:
                run, output = _measure(
                    strategy.name, _runner(strategy, model, inputs, chosen), batch, chosen, settings, folder
                )
            except Exception as exc:
                runs.append(
                    VariantRun(strategy.name, batch, error=f"{type(exc).__name__}: {exc}".splitlines()[0])
                )
                continue
            accuracy = check_outputs(strategy, expected, output, strategy.autocast)
            runs.append(VariantRun(run.variant, batch, run.latency_s, run.figures, accuracy, run.trace_path))
    return StrategyComparison(
        device=describe_device(chosen),
        timing=timing_method(chosen),
        variants=(BASELINE, *(s.name for s in strategies)),
        descriptions=("the model as given (eager)", *(s.description for s in strategies)),
        batch_sizes=sizes,
        repeats=settings["repeats"],
        warmup=settings["warmup"],
        trace_steps=settings["trace_steps"],
        runs=tuple(runs),
    )


def load_entry(spec: str) -> Callable[..., Any]:
    """`package.module:function` or `path/to/file.py:function` -> the function."""
    target, sep, attr = spec.rpartition(":")
    if not sep or not target or not attr:
        raise UsageError(f"{spec!r}: expected MODULE:FUNCTION or FILE.py:FUNCTION")
    path = Path(target)
    folder = str(path.resolve().parent) if target.endswith(".py") else str(Path.cwd())
    sys.path.insert(0, folder)
    try:
        if target.endswith(".py"):
            if not path.is_file():
                raise InputError(f"{target}: no such file")
            module_spec = importlib.util.spec_from_file_location(path.stem, path)
            assert module_spec is not None and module_spec.loader is not None
            module = importlib.util.module_from_spec(module_spec)
            module_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(target)
    except InputError:
        raise
    except Exception as exc:  # the user's module failed while importing: say which and why, in one line
        raise InputError(f"{target}: cannot import: {type(exc).__name__}: {exc}") from None
    finally:
        sys.path.remove(folder)
    function = getattr(module, attr, None)
    if not callable(function):
        raise InputError(f"{target} has no function {attr!r}")
    return function
