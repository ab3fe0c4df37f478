//! A batch of elements -> an Arrow record batch in the event table's schema, and what had to be repaired.
//!
//! The conversions are the ones `docs/ingest.md` lists (and the Python reference reader implements):
//! which `args` keys are read depends on the event's kind; numbers are read from their text exactly; a
//! value of the wrong type, an integer that does not fit its column and a negative duration are left
//! empty and counted; GPU work without `args.device` / `args.stream` takes them from `pid` / `tid`.

use std::borrow::Cow;
use std::sync::Arc;

use arrow_array::types::{Float32Type, Float64Type, Int32Type, Int64Type};
use arrow_array::{ArrayRef, DictionaryArray, Int32Array, RecordBatch, StringArray};

use crate::dict::DictBuilder;
use crate::event::{
    array_items, classify, parse_event_into, Arg, Args, ArgsKind, RawEvent, Text, Val,
};
use crate::fast::parse_event_fast;
use crate::number::{self, Parsed};
use crate::scan::{flag, Batch};
use crate::schema::{self, col, kind};
use crate::sparse::{Empty, Sparse};

/// Counts of what a batch had to skip or repair (summed over batches into the reader's report).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    pub events: u64,
    pub not_objects: u64,
    pub too_deep: u64,
    pub too_large: u64,
    pub malformed: u64,
    pub bad_utf8: u64,
    pub wrong_type: u64,
    pub out_of_range: u64,
    pub negative_durations: u64,
}

impl Stats {
    pub fn add(&mut self, o: &Stats) {
        self.events += o.events;
        self.not_objects += o.not_objects;
        self.too_deep += o.too_deep;
        self.too_large += o.too_large;
        self.malformed += o.malformed;
        self.bad_utf8 += o.bad_utf8;
        self.wrong_type += o.wrong_type;
        self.out_of_range += o.out_of_range;
        self.negative_durations += o.negative_durations;
    }
}

struct Columns {
    // ph, cat, name, pid, tid, input_dims, input_types, label, concrete_inputs, hlo_op, hlo_module, name_stack
    text: Vec<DictBuilder>,
    /// the kind of each category in the `cat` column's dictionary, by key
    cat_kinds: Vec<i32>,
    kind: Vec<i32>,
    i64s: Vec<Sparse<Int64Type>>, // by position in I64_COLS
    i32s: Vec<Sparse<Int32Type>>,
    f32s: Vec<Sparse<Float32Type>>,
    bandwidth: Sparse<Float64Type>,
}

const TEXT_COLS: [usize; 12] = [
    col::PH,
    col::CAT,
    col::NAME,
    col::PID,
    col::TID,
    col::INPUT_DIMS,
    col::INPUT_TYPES,
    col::LABEL,
    col::CONCRETE_INPUTS,
    col::HLO_OP,
    col::HLO_MODULE,
    col::NAME_STACK,
];
const I64_COLS: [usize; 19] = [
    col::TS_NS,
    col::DUR_NS,
    col::STREAM,
    col::CORRELATION,
    col::EXTERNAL_ID,
    col::FLOW_ID,
    col::SHARED_MEMORY,
    col::BYTES,
    col::PY_ID,
    col::PY_PARENT_ID,
    col::SEQ,
    col::MEM_ADDR,
    col::MEM_BYTES,
    col::MEM_ALLOCATED,
    col::MEM_RESERVED,
    col::PROGRAM_ID,
    col::STEP_NUM,
    col::WAIT_ON_STREAM,
    col::WAIT_ON_CORRELATION,
];
const I32_COLS: [usize; 10] = [
    col::DEVICE,
    col::GRID_X,
    col::GRID_X + 1,
    col::GRID_X + 2,
    col::BLOCK_X,
    col::BLOCK_X + 1,
    col::BLOCK_X + 2,
    col::REGISTERS,
    col::MEM_DEVICE_TYPE,
    col::MEM_DEVICE_ID,
];
const F32_COLS: [usize; 3] = [col::BLOCKS_PER_SM, col::WARPS_PER_SM, col::OCCUPANCY_PCT];

/// The name of the allocator's instant events, whose args fill the `mem_*` columns.
const MEMORY_EVENT: &str = "[memory]";

/// The position of column `c` in `cols` (evaluated at compile time for the constants below).
const fn slot(cols: &[usize], c: usize) -> usize {
    let mut i = 0;
    while i < cols.len() {
        if cols[i] == c {
            return i;
        }
        i += 1;
    }
    panic!("not a column of this list")
}

// text columns, by position in TEXT_COLS
const T_PH: usize = slot(&TEXT_COLS, col::PH);
const T_CAT: usize = slot(&TEXT_COLS, col::CAT);
const T_NAME: usize = slot(&TEXT_COLS, col::NAME);
const T_PID: usize = slot(&TEXT_COLS, col::PID);
const T_TID: usize = slot(&TEXT_COLS, col::TID);
const T_DIMS: usize = slot(&TEXT_COLS, col::INPUT_DIMS);
const T_TYPES: usize = slot(&TEXT_COLS, col::INPUT_TYPES);
const T_LABEL: usize = slot(&TEXT_COLS, col::LABEL);
const T_CONCRETE: usize = slot(&TEXT_COLS, col::CONCRETE_INPUTS);
const T_HLO_OP: usize = slot(&TEXT_COLS, col::HLO_OP);
const T_HLO_MODULE: usize = slot(&TEXT_COLS, col::HLO_MODULE);
const T_NAME_STACK: usize = slot(&TEXT_COLS, col::NAME_STACK);
// 64-bit integer columns, by position in I64_COLS
const L_TS: usize = slot(&I64_COLS, col::TS_NS);
const L_DUR: usize = slot(&I64_COLS, col::DUR_NS);
const L_STREAM: usize = slot(&I64_COLS, col::STREAM);
const L_CORRELATION: usize = slot(&I64_COLS, col::CORRELATION);
const L_EXTERNAL_ID: usize = slot(&I64_COLS, col::EXTERNAL_ID);
const L_FLOW_ID: usize = slot(&I64_COLS, col::FLOW_ID);
const L_SHARED_MEMORY: usize = slot(&I64_COLS, col::SHARED_MEMORY);
const L_BYTES: usize = slot(&I64_COLS, col::BYTES);
const L_PY_ID: usize = slot(&I64_COLS, col::PY_ID);
const L_PY_PARENT_ID: usize = slot(&I64_COLS, col::PY_PARENT_ID);
const L_SEQ: usize = slot(&I64_COLS, col::SEQ);
const L_PROGRAM_ID: usize = slot(&I64_COLS, col::PROGRAM_ID);
const L_STEP_NUM: usize = slot(&I64_COLS, col::STEP_NUM);
const L_WAIT_ON_STREAM: usize = slot(&I64_COLS, col::WAIT_ON_STREAM);
const L_WAIT_ON_CORRELATION: usize = slot(&I64_COLS, col::WAIT_ON_CORRELATION);
const L_MEM_ADDR: usize = slot(&I64_COLS, col::MEM_ADDR);
const L_MEM_BYTES: usize = slot(&I64_COLS, col::MEM_BYTES);
const L_MEM_ALLOCATED: usize = slot(&I64_COLS, col::MEM_ALLOCATED);
const L_MEM_RESERVED: usize = slot(&I64_COLS, col::MEM_RESERVED);
// 32-bit integer columns, by position in I32_COLS
const I_DEVICE: usize = slot(&I32_COLS, col::DEVICE);
const I_GRID_X: usize = slot(&I32_COLS, col::GRID_X);
const I_BLOCK_X: usize = slot(&I32_COLS, col::BLOCK_X);
const I_REGISTERS: usize = slot(&I32_COLS, col::REGISTERS);
const I_MEM_DEVICE_TYPE: usize = slot(&I32_COLS, col::MEM_DEVICE_TYPE);
const I_MEM_DEVICE_ID: usize = slot(&I32_COLS, col::MEM_DEVICE_ID);

impl Columns {
    fn new(n: usize) -> Self {
        Columns {
            text: (0..TEXT_COLS.len())
                .map(|_| DictBuilder::default())
                .collect(),
            cat_kinds: Vec::new(),
            kind: Vec::with_capacity(n),
            i64s: (0..I64_COLS.len()).map(|_| Sparse::default()).collect(),
            i32s: (0..I32_COLS.len()).map(|_| Sparse::default()).collect(),
            f32s: (0..F32_COLS.len()).map(|_| Sparse::default()).collect(),
            bandwidth: Sparse::default(),
        }
    }

    /// The next row's category (set in its column now) and the kind it maps to.
    fn category(&mut self, cat: Option<&str>) -> i32 {
        let Some(cat) = cat else { return kind::OTHER };
        let key = self.text[T_CAT].set(self.kind.len(), cat) as usize;
        if key == self.cat_kinds.len() {
            self.cat_kinds.push(schema::kind_code(cat));
        }
        self.cat_kinds[key]
    }

    /// The row being built (the next one).
    #[inline]
    fn row(&self) -> usize {
        self.kind.len()
    }

    #[inline]
    fn text(&mut self, c: usize, v: Option<&str>) {
        if let Some(v) = v {
            let at = self.row();
            self.text[c].set(at, v);
        }
    }

    #[inline]
    fn i64(&mut self, c: usize, v: Option<i64>) {
        let at = self.row();
        self.i64s[c].push(at, v);
    }

    #[inline]
    fn i32(&mut self, c: usize, v: Option<i32>) {
        let at = self.row();
        self.i32s[c].push(at, v);
    }

    /// End the row: its kind (every other column was set by the calls above).
    #[inline]
    fn end_row(&mut self, kind: i32) {
        self.kind.push(kind);
    }

    fn finish(self) -> Result<RecordBatch, arrow_schema::ArrowError> {
        let mut arrays: Vec<Option<ArrayRef>> = vec![None; schema::COLUMNS.len()];
        let n = self.kind.len();
        let empty = Empty::new(n);
        for (i, b) in self.text.into_iter().enumerate() {
            arrays[TEXT_COLS[i]] = Some(Arc::new(b.finish(n, &empty)));
        }
        let kinds = DictionaryArray::<Int32Type>::try_new(
            Int32Array::from(self.kind),
            Arc::new(StringArray::from(schema::KINDS.to_vec())),
        )?;
        arrays[col::KIND] = Some(Arc::new(kinds));
        for (i, b) in self.i64s.into_iter().enumerate() {
            arrays[I64_COLS[i]] = Some(Arc::new(b.finish(n, &empty)));
        }
        for (i, b) in self.i32s.into_iter().enumerate() {
            arrays[I32_COLS[i]] = Some(Arc::new(b.finish(n, &empty)));
        }
        for (i, b) in self.f32s.into_iter().enumerate() {
            arrays[F32_COLS[i]] = Some(Arc::new(b.finish(n, &empty)));
        }
        arrays[col::BANDWIDTH_GBPS] = Some(Arc::new(self.bandwidth.finish(n, &empty)));
        let columns: Vec<ArrayRef> = arrays
            .into_iter()
            .map(|a| a.expect("every column is built"))
            .collect();
        RecordBatch::try_new(schema::schema(), columns)
    }
}

/// Decode the elements of one batch.
pub fn decode_batch(batch: &Batch) -> Result<(RecordBatch, Stats), arrow_schema::ArrowError> {
    let mut stats = Stats::default();
    let mut cols = Columns::new(batch.elements.len());
    // One UTF-8 check for the whole batch; elements start and end on ASCII bytes, so slices of a valid
    // buffer are valid too. Only when the batch is not valid is each element checked (and repaired).
    let whole = simdutf8::basic::from_utf8(&batch.data).ok();
    for e in &batch.elements {
        if e.flags & flag::TOO_LARGE != 0 {
            stats.too_large += 1;
            continue;
        }
        if e.flags & flag::NOT_OBJECT != 0 {
            stats.not_objects += 1;
            continue;
        }
        if e.flags & flag::TOO_DEEP != 0 {
            stats.too_deep += 1;
            continue;
        }
        if e.flags & flag::JUNK != 0 {
            stats.malformed += 1;
            continue;
        }
        let bytes = &batch.data[e.start..e.end];
        let text: Cow<'_, str> = match whole.and_then(|s| s.get(e.start..e.end)) {
            Some(s) => Cow::Borrowed(s),
            None => match std::str::from_utf8(bytes) {
                Ok(s) => Cow::Borrowed(s),
                Err(_) => {
                    stats.bad_utf8 += 1;
                    Cow::Owned(String::from_utf8_lossy(bytes).into_owned())
                }
            },
        };
        let mut ev = RawEvent::default();
        let parsed = if parse_event_fast(&text, &mut ev) {
            Ok(())
        } else {
            ev = RawEvent::default();
            parse_event_into(&text, &mut ev)
        };
        match parsed {
            Ok(()) => {
                add_row(&ev, &mut stats, &mut cols);
                stats.events += 1;
            }
            Err(_) => stats.malformed += 1,
        }
    }
    Ok((cols.finish()?, stats))
}

fn count<T>(p: Parsed<T>, stats: &mut Stats) -> Option<T> {
    match p {
        Parsed::Value(v) => Some(v),
        Parsed::Null => None,
        Parsed::WrongType => {
            stats.wrong_type += 1;
            None
        }
        Parsed::OutOfRange => {
            stats.out_of_range += 1;
            None
        }
        Parsed::Negative => {
            stats.negative_durations += 1;
            None
        }
    }
}

fn int_of(raw: Option<&str>) -> Parsed<i64> {
    match classify(raw) {
        Val::Null => Parsed::Null,
        Val::Num(t) => number::integer(t.as_bytes(), false),
        Val::Str(s) => number::integer(s.as_bytes(), true),
        Val::Other => Parsed::WrongType,
    }
}

fn int32_of(raw: Option<&str>) -> Parsed<i32> {
    match int_of(raw) {
        Parsed::Value(v) => i32::try_from(v).map_or(Parsed::OutOfRange, Parsed::Value),
        Parsed::Null => Parsed::Null,
        Parsed::WrongType => Parsed::WrongType,
        Parsed::OutOfRange => Parsed::OutOfRange,
        Parsed::Negative => Parsed::Negative,
    }
}

fn float_of(raw: Option<&str>) -> Parsed<f64> {
    match classify(raw) {
        Val::Null => Parsed::Null,
        Val::Num(t) => number::float(t.as_bytes(), false),
        Val::Str(s) => number::float(s.as_bytes(), true),
        Val::Other => Parsed::WrongType,
    }
}

fn float32_of(raw: Option<&str>) -> Parsed<f32> {
    match float_of(raw) {
        Parsed::Value(v) if v.abs() <= f64::from(f32::MAX) => Parsed::Value(v as f32),
        Parsed::Value(_) => Parsed::OutOfRange,
        Parsed::Null => Parsed::Null,
        Parsed::WrongType => Parsed::WrongType,
        Parsed::OutOfRange => Parsed::OutOfRange,
        Parsed::Negative => Parsed::Negative,
    }
}

fn time_of(raw: Option<&str>) -> Parsed<i64> {
    match classify(raw) {
        Val::Null => Parsed::Null,
        Val::Num(t) => number::micros_to_ns(t.as_bytes()),
        Val::Str(s) => number::micros_to_ns(number::trim_ws(s.as_bytes())),
        Val::Other => Parsed::WrongType,
    }
}

/// pid / tid as text: a string as it is, an integer as written; anything else is the wrong type.
fn id_text<'a>(raw: Option<&'a str>, stats: &mut Stats) -> Option<Cow<'a, str>> {
    match classify(raw) {
        Val::Null => None,
        Val::Str(s) => Some(s),
        Val::Num(t) if !t.bytes().any(|b| matches!(b, b'.' | b'e' | b'E')) => {
            Some(Cow::Borrowed(t))
        }
        _ => {
            stats.wrong_type += 1;
            None
        }
    }
}

fn text_of<'a>(t: &Text<'a>, stats: &mut Stats) -> Option<Cow<'a, str>> {
    match t {
        Text::Str(s) => Some(s.clone()),
        Text::Wrong => {
            stats.wrong_type += 1;
            None
        }
        _ => None,
    }
}

/// GPU placement from pid / tid text: an integer as written, else the digits in the text (1 to 17 of them).
fn placement(text: Option<&str>) -> Option<i64> {
    let text = text?;
    if let Parsed::Value(v) = number::integer(text.as_bytes(), false) {
        return Some(v);
    }
    let digits: String = text.chars().filter(char::is_ascii_digit).collect();
    if digits.is_empty() || digits.len() > 17 {
        return None;
    }
    digits.parse().ok()
}

/// Raw value of a key, or of its older spelling when the key is absent or null.
fn either<'a>(args: &Args<'a>, key: Arg, old: Arg) -> Option<&'a str> {
    match args.get(key) {
        Some(raw) if raw != "null" => Some(raw),
        _ => args.get(old),
    }
}

/// A string arg as text: null / absent give None, another type is counted as the wrong type.
fn arg_text<'a>(raw: Option<&'a str>, stats: &mut Stats) -> Option<Cow<'a, str>> {
    match classify(raw) {
        Val::Str(s) => Some(s),
        Val::Null => None,
        _ => {
            stats.wrong_type += 1;
            None
        }
    }
}

/// XLA / JAX args (JAX's trace.json): `hlo_op`, `hlo_module`, `program_id`, `step_num`, and `name` as the
/// JAX name stack on events that name an HLO op (elsewhere `name` is not read).
fn xla_fields(cols: &mut Columns, args: &Args<'_>, stats: &mut Stats) {
    let hlo_op = arg_text(args.get(Arg::HloOp), stats);
    let named = hlo_op.is_some();
    cols.text(T_HLO_OP, hlo_op.as_deref());
    cols.text(
        T_HLO_MODULE,
        arg_text(args.get(Arg::HloModule), stats).as_deref(),
    );
    if named {
        cols.text(
            T_NAME_STACK,
            arg_text(args.get(Arg::Name), stats).as_deref(),
        );
    }
    cols.i64(L_PROGRAM_ID, count(int_of(args.get(Arg::ProgramId)), stats));
    cols.i64(L_STEP_NUM, count(int_of(args.get(Arg::StepNum)), stats));
}

/// Add the row of one event to `cols`.
fn add_row(ev: &RawEvent<'_>, stats: &mut Stats, cols: &mut Columns) {
    let ph = text_of(&ev.ph, stats);
    let cat = text_of(&ev.cat, stats);
    let name = text_of(&ev.name, stats);
    let pid = id_text(ev.pid, stats);
    let tid = id_text(ev.tid, stats);
    let mut k = cols.category(cat.as_deref());
    if ph.as_deref() == Some("M") {
        k = kind::METADATA;
    }
    cols.text(T_PH, ph.as_deref());
    cols.text(T_NAME, name.as_deref());
    cols.text(T_PID, pid.as_deref());
    cols.text(T_TID, tid.as_deref());
    cols.i64(L_TS, count(time_of(ev.ts), stats));
    let dur = match time_of(ev.dur) {
        Parsed::Value(v) if v < 0 => Parsed::Negative,
        other => other,
    };
    cols.i64(L_DUR, count(dur, stats));
    cols.i64(L_FLOW_ID, count(int_of(ev.id), stats));

    let args = &ev.args;
    if args.kind == ArgsKind::Wrong {
        stats.wrong_type += 1;
    }
    let gpu = matches!(k, kind::KERNEL | kind::MEMCPY | kind::MEMSET);
    let launch = matches!(k, kind::RUNTIME | kind::DRIVER);
    // GPU work without args.device / args.stream takes them from pid / tid (below)
    let (mut device, mut stream) = (None, None);
    if k == kind::PYTHON {
        cols.i64(L_PY_ID, count(int_of(args.get(Arg::PythonId)), stats));
        cols.i64(
            L_PY_PARENT_ID,
            count(int_of(args.get(Arg::PythonParentId)), stats),
        );
    } else if k == kind::METADATA {
        let label = match classify(args.get(Arg::Name)) {
            Val::Str(s) => Some(s),
            Val::Null => None,
            _ => {
                stats.wrong_type += 1;
                None
            }
        };
        cols.text(T_LABEL, label.as_deref());
    } else {
        cols.i64(
            L_EXTERNAL_ID,
            count(
                int_of(either(args, Arg::ExternalId, Arg::ExternalIdOld)),
                stats,
            ),
        );
        cols.i64(
            L_CORRELATION,
            count(
                int_of(either(args, Arg::Correlation, Arg::CorrelationId)),
                stats,
            ),
        );
        xla_fields(cols, args, stats);
        if k == kind::SYNC {
            // Kineto's cuda_sync events: the stream and the cudaEventRecord a wait is on
            for (c, key) in [
                (L_WAIT_ON_STREAM, Arg::WaitOnStream),
                (L_WAIT_ON_CORRELATION, Arg::WaitOnCorrelation),
            ] {
                cols.i64(c, count(int_of(args.get(key)), stats));
            }
        }
        if !launch {
            stream = count(int_of(args.get(Arg::Stream)), stats);
            device = count(int32_of(args.get(Arg::Device)), stats);
        }
        if gpu {
            for (axis_col, key) in [(I_GRID_X, Arg::Grid), (I_BLOCK_X, Arg::Block)] {
                if let Some(raw) = args.get(key) {
                    match array_items(raw) {
                        Some(items) => {
                            for axis in 0..3 {
                                let v = items
                                    .get(axis)
                                    .map_or(Parsed::Null, |item| int32_of(Some(item)));
                                cols.i32(axis_col + axis, count(v, stats));
                            }
                        }
                        None if raw == "null" => {}
                        None => stats.wrong_type += 1,
                    }
                }
            }
            cols.i32(
                I_REGISTERS,
                count(int32_of(args.get(Arg::Registers)), stats),
            );
            cols.i64(
                L_SHARED_MEMORY,
                count(int_of(args.get(Arg::SharedMemory)), stats),
            );
            let at = cols.row();
            for (i, key) in [Arg::BlocksPerSm, Arg::WarpsPerSm, Arg::Occupancy]
                .into_iter()
                .enumerate()
            {
                cols.f32s[i].push(at, count(float32_of(args.get(key)), stats));
            }
            cols.i64(L_BYTES, count(int_of(args.get(Arg::Bytes)), stats));
            let bandwidth = count(float_of(args.get(Arg::Bandwidth)), stats);
            cols.bandwidth.push(at, bandwidth);
        } else if !launch {
            let dims = either(args, Arg::InputDims, Arg::InputDimsOld).filter(|r| *r != "null");
            cols.text(T_DIMS, dims);
            let types = args.get(Arg::InputTypes).filter(|r| *r != "null");
            cols.text(T_TYPES, types);
            let concrete = args.get(Arg::ConcreteInputs).filter(|r| *r != "null");
            cols.text(T_CONCRETE, concrete);
            cols.i64(L_SEQ, count(int_of(args.get(Arg::Sequence)), stats));
        }
        if name.as_deref() == Some(MEMORY_EVENT) {
            for (c, key) in [
                (L_MEM_ADDR, Arg::MemAddr),
                (L_MEM_BYTES, Arg::MemBytes),
                (L_MEM_ALLOCATED, Arg::MemAllocated),
                (L_MEM_RESERVED, Arg::MemReserved),
            ] {
                cols.i64(c, count(int_of(args.get(key)), stats));
            }
            for (c, key) in [
                (I_MEM_DEVICE_TYPE, Arg::MemDeviceType),
                (I_MEM_DEVICE_ID, Arg::MemDeviceId),
            ] {
                cols.i32(c, count(int32_of(args.get(key)), stats));
            }
        }
    }
    if gpu {
        if device.is_none() {
            device = placement(pid.as_deref()).and_then(|v| i32::try_from(v).ok());
        }
        if stream.is_none() {
            stream = placement(tid.as_deref());
        }
    }
    cols.i32(I_DEVICE, device);
    cols.i64(L_STREAM, stream);
    cols.end_row(k);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scan::Scanner;
    use arrow_array::cast::AsArray;
    use arrow_array::types::Int64Type;
    use arrow_array::Array;

    fn decode(doc: &str) -> (RecordBatch, Stats) {
        let mut s = Scanner::new(1 << 20);
        s.feed(doc.as_bytes());
        s.finish();
        let batches = s.take_batches();
        decode_batch(&batches[0]).unwrap()
    }

    #[test]
    fn kernel_row() {
        let (b, st) = decode(
            r#"[{"ph":"X","cat":"kernel","name":"k\u0041","pid":0,"tid":7,"ts":1712192699123456.789,"dur":2.5,
            "args":{"stream":7,"device":0,"grid":[2,1,1],"block":[128,1,1],"correlation":99,"x":[{"y":1}]}},
            {"ph":"X","cat":"cpu_op","name":"aten::mm","pid":"1","tid":"2","ts":"3","dur":-1,
            "args":{"Input Dims":[[1, 2], []],"External id":5}}, 7]"#,
        );
        assert_eq!(b.num_rows(), 2);
        assert_eq!(st.not_objects, 1);
        assert_eq!(st.negative_durations, 1);
        let ts = b.column(col::TS_NS).as_primitive::<Int64Type>();
        assert_eq!(ts.value(0), 1_712_192_699_123_456_789);
        assert_eq!(ts.value(1), 3000);
        let names = b.column(col::NAME).as_dictionary::<Int32Type>();
        let values = names.values().as_string::<i32>();
        assert_eq!(values.value(names.keys().value(0) as usize), "kA");
        let dims = b.column(col::INPUT_DIMS).as_dictionary::<Int32Type>();
        assert_eq!(
            dims.values()
                .as_string::<i32>()
                .value(dims.keys().value(1) as usize),
            "[[1, 2], []]"
        );
    }

    #[test]
    fn memory_row() {
        let (b, st) = decode(
            r#"[{"ph":"i","cat":"cpu_instant_event","name":"[memory]","pid":1,"tid":1,"ts":5,
            "args":{"Addr":139654046813696,"Bytes":-512,"Total Allocated":1024,"Total Reserved":"2048",
            "Device Type":6,"Device Id":0,"Ev Idx":3}},
            {"ph":"i","name":"other","ts":6,"args":{"Bytes":7,"Device Type":1}},
            {"ph":"i","name":"[memory]","ts":7,"args":{"Bytes":4,"Device Type":0,"Device Id":4294967296}}]"#,
        );
        assert_eq!(b.num_rows(), 3);
        assert_eq!(st.out_of_range, 1);
        let i64 = |c: usize, r: usize| {
            let a = b.column(c).as_primitive::<Int64Type>();
            (!a.is_null(r)).then(|| a.value(r))
        };
        let i32 = |c: usize, r: usize| {
            let a = b.column(c).as_primitive::<Int32Type>();
            (!a.is_null(r)).then(|| a.value(r))
        };
        assert_eq!(i64(col::MEM_ADDR, 0), Some(139_654_046_813_696));
        assert_eq!(i64(col::MEM_BYTES, 0), Some(-512));
        assert_eq!(i64(col::MEM_ALLOCATED, 0), Some(1024));
        assert_eq!(i64(col::MEM_RESERVED, 0), Some(2048));
        assert_eq!(i32(col::MEM_DEVICE_TYPE, 0), Some(6));
        assert_eq!(i32(col::MEM_DEVICE_ID, 0), Some(0));
        // Only events named "[memory]" fill the columns.
        assert_eq!(i64(col::MEM_BYTES, 1), None);
        assert_eq!(i32(col::MEM_DEVICE_TYPE, 1), None);
        // Old traces: no address, no totals.
        assert_eq!(i64(col::MEM_ADDR, 2), None);
        assert_eq!(i64(col::MEM_BYTES, 2), Some(4));
        assert_eq!(i32(col::MEM_DEVICE_ID, 2), None);
    }
}
