"""Advice in the user's own terms (issue 59 item 7): the remedies of the rules whose general advice names
PyTorch's APIs, for the framework and vendor the trace shows. A JAX program (an xplane capture) is told about
`jax.jit`, `lax.scan` and XLA's command buffers, a C++ / TensorRT program in an Nsight Systems or rocprof export
about CUDA / HIP graphs, streams and engine settings; a PyTorch trace keeps the rules' text, with HIP graphs
named on AMD. `--list-rules` keeps the rules' general text. Definitions: docs/advice.md, "Advice in the user's
own terms"."""

from __future__ import annotations

from dataclasses import replace
from typing import Final

from opscope.analysis.base.names import names_of
from opscope.analysis.findings import Advice, Finding
from opscope.model.schema import Kind
from opscope.model.trace import Trace

PYTORCH: Final = "pytorch"
JAX: Final = "jax"
NATIVE: Final = "native"  # a C++ / CUDA / HIP / TensorRT program: no framework's operators in the trace
FRAMEWORKS: Final = (PYTORCH, JAX, NATIVE)

_TORCH_OP = r"^(aten|c10d|autograd)::|^ProfilerStep#|^Optimizer\."


def framework_of(trace: Trace) -> str:
    """The framework the trace was recorded from: JAX for an xplane capture, PyTorch where the trace holds
    PyTorch's operators (a Kineto trace; an Nsight Systems or rocprof export of a PyTorch program with its NVTX
    ranges), else a native program."""
    if trace.meta.format == "xplane":
        return JAX
    if trace.meta.format == "kineto":
        return PYTORCH
    torch_ops = names_of(trace, [Kind.CPU_OP, Kind.USER_ANNOTATION], _TORCH_OP)
    return PYTORCH if torch_ops else NATIVE


def graph(amd: bool) -> str:
    return "HIP graph" if amd else "CUDA graph"


def remedies(rule: str, framework: str, amd: bool) -> str | None:
    """The advice of `rule` for a framework other than PyTorch (None: the rule's own text stands)."""
    g = graph(amd)
    if framework == JAX:
        return {
            "host_bound": "The host does not queue work fast enough: put the whole step under one jax.jit (and the "
            "loop over layers or micro-batches under lax.scan) so XLA launches it as one program; let XLA record "
            "command buffers (--xla_gpu_enable_command_buffer, the default in recent JAX) so a step replays as a "
            f"{g}; keep host work (data loading, logging, .block_until_ready()) out "
            "of the step.",
            "launch_bound_small_kernels": "Many tiny kernels launched one by one: jit larger functions so XLA fuses "
            "them, scan over repeated layers (lax.scan) instead of a Python loop, and let XLA's command buffers "
            f"replay the step as a {g} (--xla_gpu_enable_command_buffer).",
            "sync_in_loop": "Each host synchronisation (.block_until_ready(), jax.device_get, printing or "
            "converting a device array in the loop) stops the host from queueing work ahead of the GPU: read "
            "results once per N steps, asynchronously (jax.debug.callback, or device_get of the previous step).",
            "fusion_candidates": "Fuse them: keep the chain inside one jax.jit so XLA fuses it, or write it as a "
            "Pallas kernel.",
            "pageable_memcpy": "Host-to-device copies from pageable memory are staged through a pinned buffer: "
            "transfer the next batch with jax.device_put ahead of the step (prefetch to device), and keep "
            "arrays on the device between steps instead of round trips through NumPy.",
            "dataloader_bound": "Load data ahead of the step: a tf.data / grain pipeline with prefetch, "
            "jax.device_put of the next batch while this one runs, decoding off the main thread.",
        }.get(rule)
    if framework == NATIVE:
        return {
            "host_bound": "The host does not queue work fast enough: capture the steady loop in a "
            f"{g} ({'hipStreamBeginCapture / hipGraphLaunch' if amd else 'cudaStreamBeginCapture / cudaGraphLaunch'}) "
            "and replay it, issue independent work on separate streams, move host preprocessing to its own "
            "thread; for a TensorRT engine, enqueue asynchronously (enqueueV3) and let the builder fuse more "
            "(a larger workspace, fewer plugins).",
            "launch_bound_small_kernels": "Many tiny kernels launched one by one: replay them as a "
            f"{g}, fuse them into fewer kernels, or let the engine builder fuse "
            "them (TensorRT: fewer plugins, a larger builder workspace).",
            "sync_in_loop": "Each host synchronisation stops the host from queueing work ahead of the GPU: wait on "
            "events (cudaEventSynchronize / hipEventSynchronize) only where the result is needed, and use "
            "asynchronous copies into pinned memory.",
            "pageable_memcpy": "Copies to or from pageable host memory are staged through a pinned buffer and "
            "block the host: allocate those host buffers pinned (cudaMallocHost / cudaHostAlloc; hipHostMalloc) "
            "or register them (cudaHostRegister / hipHostRegister) and copy with cudaMemcpyAsync / "
            "hipMemcpyAsync on a stream.",
            "fusion_candidates": "Fuse them: one kernel per chain of elementwise / normalisation work, or an "
            "engine builder that fuses them (TensorRT layer fusion).",
        }.get(rule)
    if amd:  # PyTorch on ROCm: the same APIs, HIP graphs under torch.cuda.graphs
        return {
            "launch_bound_small_kernels": "Many kernels shorter than their launch: capture the steady step in a "
            "HIP graph (torch.cuda.graphs works on ROCm, or torch.compile(mode='reduce-overhead')), fuse small "
            "ops (torch.compile), or batch more work per kernel.",
        }.get(rule)
    return None


OWN_TERMS: Final = frozenset({"host_bound"})  # rules that choose their advice by what the trace shows


def _in_terms(finding: Finding, framework: str, amd: bool) -> Finding:
    text = None if finding.id in OWN_TERMS else remedies(finding.id, framework, amd)
    return replace(finding, advice=text) if text else finding


def with_framework_advice(advice: Advice, framework: str, amd: bool) -> Advice:
    """`advice` with the remedies of the trace's framework and vendor in place of PyTorch's."""
    return replace(
        advice,
        findings=tuple(_in_terms(f, framework, amd) for f in advice.findings),
        withheld=tuple(_in_terms(f, framework, amd) for f in advice.withheld),
    )


__all__ = ["FRAMEWORKS", "JAX", "NATIVE", "PYTORCH", "framework_of", "remedies", "with_framework_advice"]
