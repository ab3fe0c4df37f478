"""The one declared table of trace arguments -> event-table columns (Kineto / Chrome-trace `args` keys).

Each row names an `args` key as profilers write it, the attribute the Python reference reader decodes it into
(`ingest/pydecode.py` builds its `RawArgs` struct from this table), and the columns of `model/schema.py` it
fills. Where two keys feed one column (schema generations: `External id` / `external id`, `Input Dims` /
`Input dims`, `correlation` / `correlation_id`), the first listed wins. The Rust decoder reads the same keys
(`native/ingest/src/event.rs`: `ARG_KEYS`, in this order); `tests/test_arg_columns.py` checks that the Rust
decoder, the Python reader and the schema agree with this table, so adding a column is one row here, one key
in Rust's list, and the conversion that fills it.

Plain data: importing this module imports nothing else.
"""

from __future__ import annotations

from typing import Final, NamedTuple


class ArgColumn(NamedTuple):
    key: str  # the `args` key as written in the trace
    attr: str  # the reference reader's field (pydecode.RawArgs)
    columns: tuple[str, ...]  # event-table columns it fills (model/kinds.py: Col)
    note: str = ""


ARG_COLUMNS: Final[tuple[ArgColumn, ...]] = (
    ArgColumn("External id", "external_id", ("external_id",), "CPU op <-> runtime call id"),
    ArgColumn("external id", "external_id_old", ("external_id",), "older Kineto spelling"),
    ArgColumn("correlation", "correlation", ("correlation",), "runtime call <-> GPU activity id"),
    ArgColumn("stream", "stream", ("stream",)),
    ArgColumn("device", "device", ("device",)),
    ArgColumn("grid", "grid", ("grid_x", "grid_y", "grid_z"), "[x, y, z]"),
    ArgColumn("block", "block", ("block_x", "block_y", "block_z"), "[x, y, z]"),
    ArgColumn("registers per thread", "registers", ("registers_per_thread",)),
    ArgColumn("shared memory", "shared_memory", ("shared_memory",), "bytes per block"),
    ArgColumn("blocks per SM", "blocks_per_sm", ("blocks_per_sm",)),
    ArgColumn("warps per SM", "warps_per_sm", ("warps_per_sm",)),
    ArgColumn("est. achieved occupancy %", "occupancy", ("est_occupancy_pct",)),
    ArgColumn("bytes", "nbytes", ("bytes",), "memcpy / memset size"),
    ArgColumn("memory bandwidth (GB/s)", "bandwidth", ("bandwidth_gbps",)),
    ArgColumn("Input Dims", "input_dims", ("input_dims",)),
    ArgColumn("Input dims", "input_dims_old", ("input_dims",), "older Kineto spelling"),
    ArgColumn("Input type", "input_types", ("input_types",)),
    ArgColumn("Concrete Inputs", "concrete", ("concrete_inputs",)),
    ArgColumn("Sequence number", "seq", ("sequence",), "forward <-> backward op id"),
    ArgColumn("Python id", "py_id", ("python_id",)),
    ArgColumn("Python parent id", "py_parent", ("python_parent_id",)),
    ArgColumn("name", "label", ("label", "name_stack"), "thread / process names; JAX's name stack"),
    ArgColumn("Addr", "mem_addr", ("mem_addr",), "[memory] events"),
    ArgColumn("Bytes", "mem_bytes", ("mem_bytes",), "[memory] events: + allocation, - free"),
    ArgColumn("Total Allocated", "mem_allocated", ("mem_total_allocated",), "[memory] events"),
    ArgColumn("Total Reserved", "mem_reserved", ("mem_total_reserved",), "[memory] events"),
    ArgColumn("Device Type", "mem_device_type", ("mem_device_type",), "[memory] events"),
    ArgColumn("Device Id", "mem_device_id", ("mem_device_id",), "[memory] events"),
    ArgColumn("hlo_op", "hlo_op", ("hlo_op",), "XLA / JAX"),
    ArgColumn("hlo_module", "hlo_module", ("hlo_module",), "XLA / JAX"),
    ArgColumn("program_id", "program_id", ("program_id",), "XLA / JAX"),
    ArgColumn("step_num", "step_num", ("step_num",), "XLA / JAX"),
    ArgColumn("correlation_id", "correlation_id", ("correlation",), "XLA / JAX spelling"),
    ArgColumn("wait_on_stream", "wait_on_stream", ("wait_on_stream",), "cudaStreamWaitEvent"),
    ArgColumn(
        "wait_on_cuda_event_record_corr_id",
        "wait_on_correlation",
        ("wait_on_correlation",),
        "cudaStreamWaitEvent",
    ),
)

ARG_KEYS: Final[tuple[str, ...]] = tuple(a.key for a in ARG_COLUMNS)
