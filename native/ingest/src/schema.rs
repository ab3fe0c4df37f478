//! The event table's Arrow schema, kinds and category map: a mirror of `opscope/model/schema.py`.
//!
//! Python's module is the source of truth; `tests/test_native_reader.py` checks that this copy equals it
//! (column names, types, order, kinds, categories), so the two cannot drift apart.

use std::sync::{Arc, OnceLock};

use arrow_schema::{DataType, Field, Schema, SchemaRef};

pub const KINDS: [&str; 16] = [
    "kernel",
    "memcpy",
    "memset",
    "cpu_op",
    "runtime",
    "driver",
    "user_annotation",
    "gpu_user_annotation",
    "python_function",
    "flow",
    "fwdbwd",
    "cuda_sync",
    "instant",
    "metadata",
    "trace_span",
    "other",
];

pub mod kind {
    pub const KERNEL: i32 = 0;
    pub const MEMCPY: i32 = 1;
    pub const MEMSET: i32 = 2;
    pub const RUNTIME: i32 = 4;
    pub const DRIVER: i32 = 5;
    pub const PYTHON: i32 = 8;
    pub const SYNC: i32 = 11;
    pub const METADATA: i32 = 13;
    pub const OTHER: i32 = 15;
}

/// Raw category -> kind code, across schema generations (see `CATEGORY_KINDS` in schema.py).
pub const CATEGORY_KINDS: [(&str, &str); 28] = [
    ("kernel", "kernel"),
    ("Kernel", "kernel"),
    ("gpu_memcpy", "memcpy"),
    ("Memcpy", "memcpy"),
    ("gpu_memset", "memset"),
    ("Memset", "memset"),
    ("cpu_op", "cpu_op"),
    ("Operator", "cpu_op"),
    ("operator", "cpu_op"),
    ("cuda_runtime", "runtime"),
    ("Runtime", "runtime"),
    ("hip_runtime", "runtime"),
    ("cuda_driver", "driver"),
    ("hip_driver", "driver"),
    ("user_annotation", "user_annotation"),
    ("gpu_user_annotation", "gpu_user_annotation"),
    ("cuda_profiler_range", "gpu_user_annotation"),
    ("python_function", "python_function"),
    ("ac2g", "flow"),
    ("async_cpu_to_gpu", "flow"),
    ("async", "flow"),
    ("async_gpu", "flow"),
    ("fwdbwd", "fwdbwd"),
    ("cuda_sync", "cuda_sync"),
    ("cpu_instant_event", "instant"),
    ("Trace", "trace_span"),
    ("mtia_ccp_events", "kernel"),
    ("mtia_runtime", "runtime"),
];

pub fn kind_code(cat: &str) -> i32 {
    for (c, k) in CATEGORY_KINDS {
        if c == cat {
            return KINDS
                .iter()
                .position(|x| *x == k)
                .map_or(kind::OTHER, |p| p as i32);
        }
    }
    kind::OTHER
}

/// Column positions, in table order.
pub mod col {
    pub const PH: usize = 0;
    pub const CAT: usize = 1;
    pub const KIND: usize = 2;
    pub const NAME: usize = 3;
    pub const PID: usize = 4;
    pub const TID: usize = 5;
    pub const TS_NS: usize = 6;
    pub const DUR_NS: usize = 7;
    pub const DEVICE: usize = 8;
    pub const STREAM: usize = 9;
    pub const CORRELATION: usize = 10;
    pub const EXTERNAL_ID: usize = 11;
    pub const FLOW_ID: usize = 12;
    pub const GRID_X: usize = 13;
    pub const BLOCK_X: usize = 16;
    pub const REGISTERS: usize = 19;
    pub const SHARED_MEMORY: usize = 20;
    pub const BLOCKS_PER_SM: usize = 21;
    pub const WARPS_PER_SM: usize = 22;
    pub const OCCUPANCY_PCT: usize = 23;
    pub const BYTES: usize = 24;
    pub const BANDWIDTH_GBPS: usize = 25;
    pub const INPUT_DIMS: usize = 26;
    pub const INPUT_TYPES: usize = 27;
    pub const PY_ID: usize = 28;
    pub const PY_PARENT_ID: usize = 29;
    pub const LABEL: usize = 30;
    pub const SEQ: usize = 31;
    pub const MEM_ADDR: usize = 32;
    pub const MEM_BYTES: usize = 33;
    pub const MEM_ALLOCATED: usize = 34;
    pub const MEM_RESERVED: usize = 35;
    pub const MEM_DEVICE_TYPE: usize = 36;
    pub const MEM_DEVICE_ID: usize = 37;
    pub const CONCRETE_INPUTS: usize = 38;
    pub const HLO_OP: usize = 39;
    pub const HLO_MODULE: usize = 40;
    pub const PROGRAM_ID: usize = 41;
    pub const NAME_STACK: usize = 42;
    pub const STEP_NUM: usize = 43;
    pub const WAIT_ON_STREAM: usize = 44;
    pub const WAIT_ON_CORRELATION: usize = 45;
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ColType {
    Text,
    I64,
    I32,
    F32,
    F64,
}

pub const COLUMNS: [(&str, ColType); 46] = [
    ("ph", ColType::Text),
    ("cat", ColType::Text),
    ("kind", ColType::Text),
    ("name", ColType::Text),
    ("pid", ColType::Text),
    ("tid", ColType::Text),
    ("ts_ns", ColType::I64),
    ("dur_ns", ColType::I64),
    ("device", ColType::I32),
    ("stream", ColType::I64),
    ("correlation", ColType::I64),
    ("external_id", ColType::I64),
    ("flow_id", ColType::I64),
    ("grid_x", ColType::I32),
    ("grid_y", ColType::I32),
    ("grid_z", ColType::I32),
    ("block_x", ColType::I32),
    ("block_y", ColType::I32),
    ("block_z", ColType::I32),
    ("registers_per_thread", ColType::I32),
    ("shared_memory", ColType::I64),
    ("blocks_per_sm", ColType::F32),
    ("warps_per_sm", ColType::F32),
    ("est_occupancy_pct", ColType::F32),
    ("bytes", ColType::I64),
    ("bandwidth_gbps", ColType::F64),
    ("input_dims", ColType::Text),
    ("input_types", ColType::Text),
    ("python_id", ColType::I64),
    ("python_parent_id", ColType::I64),
    ("label", ColType::Text),
    ("sequence", ColType::I64),
    ("mem_addr", ColType::I64),
    ("mem_bytes", ColType::I64),
    ("mem_total_allocated", ColType::I64),
    ("mem_total_reserved", ColType::I64),
    ("mem_device_type", ColType::I32),
    ("mem_device_id", ColType::I32),
    ("concrete_inputs", ColType::Text),
    ("hlo_op", ColType::Text),
    ("hlo_module", ColType::Text),
    ("program_id", ColType::I64),
    ("name_stack", ColType::Text),
    ("step_num", ColType::I64),
    ("wait_on_stream", ColType::I64),
    ("wait_on_correlation", ColType::I64),
];

pub fn arrow_type(t: ColType) -> DataType {
    match t {
        ColType::Text => DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
        ColType::I64 => DataType::Int64,
        ColType::I32 => DataType::Int32,
        ColType::F32 => DataType::Float32,
        ColType::F64 => DataType::Float64,
    }
}

pub fn schema() -> SchemaRef {
    static SCHEMA: OnceLock<SchemaRef> = OnceLock::new();
    SCHEMA
        .get_or_init(|| {
            Arc::new(Schema::new(
                COLUMNS
                    .iter()
                    .map(|(name, t)| Field::new(*name, arrow_type(*t), true))
                    .collect::<Vec<_>>(),
            ))
        })
        .clone()
}
