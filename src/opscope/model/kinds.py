"""Column names and event kinds of the event table, as plain constants (no polars, no pyarrow).

`schema.py` adds the dtypes; this module exists so that code which only needs names (the CLI's options, the
reader registry) can import them without importing the columnar libraries.
"""

from __future__ import annotations

from typing import Final


class Col:
    """Column names of the event table."""

    PH: Final = "ph"  # Chrome-trace phase: X (complete), s/f (flow), i (instant), M (metadata), C (counter)
    CAT: Final = "cat"  # raw category as written by the profiler (kept even when unknown)
    KIND: Final = "kind"  # normalised category, one of `Kind` (same across schema generations)
    NAME: Final = "name"
    PID: Final = "pid"  # process id (CPU events) or device id (GPU events), as text
    TID: Final = "tid"  # thread id (CPU events) or stream (GPU events), as text
    TS_NS: Final = "ts_ns"  # start, integer nanoseconds on the trace's own clock
    DUR_NS: Final = "dur_ns"  # duration in nanoseconds (null for instants, flows, metadata)
    DEVICE: Final = "device"  # GPU index for GPU work (args.device, else pid)
    STREAM: Final = "stream"  # GPU stream for GPU work (args.stream, else tid)
    CORRELATION: Final = "correlation"  # runtime launch <-> GPU activity id
    EXTERNAL_ID: Final = "external_id"  # CPU op <-> runtime call id ("External id")
    FLOW_ID: Final = "flow_id"  # id of flow events (ph s/f)
    GRID_X: Final = "grid_x"
    GRID_Y: Final = "grid_y"
    GRID_Z: Final = "grid_z"
    BLOCK_X: Final = "block_x"
    BLOCK_Y: Final = "block_y"
    BLOCK_Z: Final = "block_z"
    REGISTERS: Final = "registers_per_thread"
    SHARED_MEMORY: Final = "shared_memory"  # bytes of shared memory per block
    BLOCKS_PER_SM: Final = "blocks_per_sm"
    WARPS_PER_SM: Final = "warps_per_sm"
    OCCUPANCY_PCT: Final = "est_occupancy_pct"  # "est. achieved occupancy %"
    BYTES: Final = "bytes"  # memcpy / memset size
    BANDWIDTH_GBPS: Final = "bandwidth_gbps"  # "memory bandwidth (GB/s)" as recorded
    INPUT_DIMS: Final = "input_dims"  # JSON text of "Input Dims" (record_shapes)
    INPUT_TYPES: Final = "input_types"  # JSON text of "Input type"
    PY_ID: Final = "python_id"  # with_stack: "Python id"
    PY_PARENT_ID: Final = "python_parent_id"  # with_stack: "Python parent id"
    LABEL: Final = "label"  # args.name of metadata events (process / thread names)
    SEQ: Final = "sequence"  # "Sequence number" (autograd forward/backward pairing)
    # Allocator events ("[memory]" instants, profile_memory=True); empty on every other row.
    MEM_ADDR: Final = "mem_addr"  # "Addr": address of the block (absent in PyTorch 1.9 traces)
    MEM_BYTES: Final = "mem_bytes"  # "Bytes": > 0 allocation, < 0 free
    MEM_ALLOCATED: Final = "mem_total_allocated"  # "Total Allocated" after the event, bytes
    MEM_RESERVED: Final = "mem_total_reserved"  # "Total Reserved" after the event, bytes
    MEM_DEVICE_TYPE: Final = "mem_device_type"  # "Device Type": the c10 enum (0 CPU, 1 CUDA, 6 HIP, ...)
    MEM_DEVICE_ID: Final = "mem_device_id"  # "Device Id" (-1 for the CPU)
    CONCRETE_INPUTS: Final = (
        "concrete_inputs"  # JSON text of "Concrete Inputs" (scalar arguments, record_shapes)
    )
    HLO_OP: Final = "hlo_op"  # XLA: the HLO instruction an event ran for (fusion.3, custom-call.1, ...)
    HLO_MODULE: Final = "hlo_module"  # XLA: the HLO module (compiled program) it belongs to (jit_step, ...)
    PROGRAM_ID: Final = "program_id"  # XLA: the compiled program's id
    NAME_STACK: Final = "name_stack"  # JAX name stack of the HLO op (jit(loss)/jvp()/dot_general)
    WAIT_ON_STREAM: Final = "wait_on_stream"  # cuda_sync events: the stream whose recorded event is waited on
    WAIT_ON_CORRELATION: Final = (
        "wait_on_correlation"  # cuda_sync: correlation id of that cudaEventRecord call
    )
    STEP_NUM: Final = "step_num"  # step number of a step marker (jax.profiler.StepTraceAnnotation step_num)


class Kind:
    """Normalised event kinds: the same names whatever schema generation or vendor wrote the trace."""

    KERNEL: Final = "kernel"
    MEMCPY: Final = "memcpy"
    MEMSET: Final = "memset"
    CPU_OP: Final = "cpu_op"
    RUNTIME: Final = "runtime"  # cudaLaunchKernel, hipLaunchKernel, cudaMemcpyAsync, ...
    DRIVER: Final = "driver"  # cuLaunchKernel (Triton), ...
    USER_ANNOTATION: Final = "user_annotation"  # record_function / ProfilerStep on the CPU side
    GPU_ANNOTATION: Final = "gpu_user_annotation"
    PYTHON: Final = "python_function"
    FLOW: Final = "flow"  # launch -> GPU flow arrows (ac2g, async_cpu_to_gpu, old "async")
    FWDBWD: Final = "fwdbwd"  # autograd forward -> backward flows
    SYNC: Final = "cuda_sync"
    INSTANT: Final = "instant"
    METADATA: Final = "metadata"
    TRACE: Final = "trace_span"  # the profiler's own "Trace" span over the whole capture
    OTHER: Final = "other"


KINDS: Final[tuple[str, ...]] = (
    Kind.KERNEL,
    Kind.MEMCPY,
    Kind.MEMSET,
    Kind.CPU_OP,
    Kind.RUNTIME,
    Kind.DRIVER,
    Kind.USER_ANNOTATION,
    Kind.GPU_ANNOTATION,
    Kind.PYTHON,
    Kind.FLOW,
    Kind.FWDBWD,
    Kind.SYNC,
    Kind.INSTANT,
    Kind.METADATA,
    Kind.TRACE,
    Kind.OTHER,
)

# The position of each kind in KINDS: the code under the `kind` dictionary column.
KIND_CODES: Final[dict[str, int]] = {kind: code for code, kind in enumerate(KINDS)}

GPU_KINDS: Final[tuple[str, ...]] = (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET)

# Raw category -> kind, across schema generations (2021 capitalised names, current lower-case names, AMD).
CATEGORY_KINDS: Final[dict[str, str]] = {
    "kernel": Kind.KERNEL,
    "Kernel": Kind.KERNEL,
    "gpu_memcpy": Kind.MEMCPY,
    "Memcpy": Kind.MEMCPY,
    "gpu_memset": Kind.MEMSET,
    "Memset": Kind.MEMSET,
    "cpu_op": Kind.CPU_OP,
    "Operator": Kind.CPU_OP,
    "operator": Kind.CPU_OP,
    "cuda_runtime": Kind.RUNTIME,
    "Runtime": Kind.RUNTIME,
    "hip_runtime": Kind.RUNTIME,
    "cuda_driver": Kind.DRIVER,
    "hip_driver": Kind.DRIVER,
    "user_annotation": Kind.USER_ANNOTATION,
    "gpu_user_annotation": Kind.GPU_ANNOTATION,
    # CUPTI's range profiler: ranges over the device work they measured, drawn on the device (not work itself)
    "cuda_profiler_range": Kind.GPU_ANNOTATION,
    "python_function": Kind.PYTHON,
    "ac2g": Kind.FLOW,
    "async_cpu_to_gpu": Kind.FLOW,
    "async": Kind.FLOW,
    "async_gpu": Kind.FLOW,
    "fwdbwd": Kind.FWDBWD,
    "cuda_sync": Kind.SYNC,
    "cpu_instant_event": Kind.INSTANT,
    "Trace": Kind.TRACE,
    # Meta MTIA: the accelerator's command-processor events (device work, pid = the device id) and the runtime
    # calls that launch them (args.correlation; linked to the device events by ac2g flows).
    "mtia_ccp_events": Kind.KERNEL,
    "mtia_runtime": Kind.RUNTIME,
}
