//! One event object -> one row of the event table.
//!
//! serde_json parses each element the scanner cut out, with visitors that keep only the fields the table
//! needs: text fields borrowed from the input where they have no escapes, every other field as its raw
//! JSON text (`RawValue`), converted afterwards by the exact rules of `number.rs`. Unknown keys are
//! validated and skipped without building anything. Duplicate keys: the last one wins.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

/// A text field as found: absent / null, a string, or something else.
#[derive(Debug, Default, Clone, PartialEq)]
pub enum Text<'a> {
    #[default]
    Absent,
    Null,
    Str(Cow<'a, str>),
    Wrong,
}

struct TextVisitor;

impl<'de> Visitor<'de> for TextVisitor {
    type Value = Text<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Text::Str(Cow::Borrowed(v)))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Text::Str(Cow::Owned(v.to_owned())))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Text::Str(Cow::Owned(v)))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Text::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Text::Null)
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Text::Wrong)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Text::Wrong)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(Text::Wrong)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Text::Wrong)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Text::Wrong)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Text::Wrong)
    }
}

struct TextSeed;

impl<'de> DeserializeSeed<'de> for TextSeed {
    type Value = Text<'de>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(TextVisitor)
    }
}

/// The `args` keys the table reads.
#[derive(Clone, Copy)]
pub enum Arg {
    ExternalId = 0,
    ExternalIdOld,
    Correlation,
    Stream,
    Device,
    Grid,
    Block,
    Registers,
    SharedMemory,
    BlocksPerSm,
    WarpsPerSm,
    Occupancy,
    Bytes,
    Bandwidth,
    InputDims,
    InputDimsOld,
    InputTypes,
    ConcreteInputs,
    Sequence,
    PythonId,
    PythonParentId,
    Name,
    MemAddr,
    MemBytes,
    MemAllocated,
    MemReserved,
    MemDeviceType,
    MemDeviceId,
    HloOp,
    HloModule,
    ProgramId,
    StepNum,
    CorrelationId,
    WaitOnStream,
    WaitOnCorrelation,
}

pub const N_ARGS: usize = 35;

/// The `args` keys the table reads, in `Arg` order: the declared table `opscope/model/args.py` (`ARG_KEYS`)
/// lists the same keys in the same order, and `tests/test_arg_columns.py` checks it through `arg_keys()`.
pub const ARG_KEYS: [&str; N_ARGS] = [
    "External id",
    "external id",
    "correlation",
    "stream",
    "device",
    "grid",
    "block",
    "registers per thread",
    "shared memory",
    "blocks per SM",
    "warps per SM",
    "est. achieved occupancy %",
    "bytes",
    "memory bandwidth (GB/s)",
    "Input Dims",
    "Input dims",
    "Input type",
    "Concrete Inputs",
    "Sequence number",
    "Python id",
    "Python parent id",
    "name",
    "Addr",
    "Bytes",
    "Total Allocated",
    "Total Reserved",
    "Device Type",
    "Device Id",
    "hlo_op",
    "hlo_module",
    "program_id",
    "step_num",
    "correlation_id",
    "wait_on_stream",
    "wait_on_cuda_event_record_corr_id",
];

/// The key's `Arg`: a `match` (the hot path of every event's args), kept equal to `ARG_KEYS` by the test below.
pub(crate) fn arg_of(key: &str) -> Option<Arg> {
    Some(match key {
        "External id" => Arg::ExternalId,
        "external id" => Arg::ExternalIdOld,
        "correlation" => Arg::Correlation,
        "stream" => Arg::Stream,
        "device" => Arg::Device,
        "grid" => Arg::Grid,
        "block" => Arg::Block,
        "registers per thread" => Arg::Registers,
        "shared memory" => Arg::SharedMemory,
        "blocks per SM" => Arg::BlocksPerSm,
        "warps per SM" => Arg::WarpsPerSm,
        "est. achieved occupancy %" => Arg::Occupancy,
        "bytes" => Arg::Bytes,
        "memory bandwidth (GB/s)" => Arg::Bandwidth,
        "Input Dims" => Arg::InputDims,
        "Input dims" => Arg::InputDimsOld,
        "Input type" => Arg::InputTypes,
        "Concrete Inputs" => Arg::ConcreteInputs,
        "Sequence number" => Arg::Sequence,
        "Python id" => Arg::PythonId,
        "Python parent id" => Arg::PythonParentId,
        "name" => Arg::Name,
        "Addr" => Arg::MemAddr,
        "Bytes" => Arg::MemBytes,
        "Total Allocated" => Arg::MemAllocated,
        "Total Reserved" => Arg::MemReserved,
        "Device Type" => Arg::MemDeviceType,
        "Device Id" => Arg::MemDeviceId,
        "hlo_op" => Arg::HloOp,
        "hlo_module" => Arg::HloModule,
        "program_id" => Arg::ProgramId,
        "step_num" => Arg::StepNum,
        "correlation_id" => Arg::CorrelationId,
        "wait_on_stream" => Arg::WaitOnStream,
        "wait_on_cuda_event_record_corr_id" => Arg::WaitOnCorrelation,
        _ => return None,
    })
}

/// `args` as found: absent, an object (the known keys' raw values), or another type.
#[derive(Default, Clone, Copy, PartialEq, Eq, Debug)]
pub enum ArgsKind {
    #[default]
    Absent,
    Object,
    Wrong,
}

/// The known keys' raw values (meaningful only for an object). Filled in place by the parser: at 33 fat
/// pointers it is too large to move through serde's `Result`s once per event (those copies were ~5% of the
/// decoder's time).
#[derive(Debug, PartialEq)]
pub struct Args<'a> {
    pub kind: ArgsKind,
    pub(crate) values: [Option<&'a str>; N_ARGS],
}

impl Default for Args<'_> {
    fn default() -> Self {
        Args {
            kind: ArgsKind::default(),
            values: [None; N_ARGS],
        }
    }
}

impl<'a> Args<'a> {
    pub fn get(&self, arg: Arg) -> Option<&'a str> {
        match self.kind {
            ArgsKind::Object => self.values[arg as usize],
            _ => None,
        }
    }
}

struct ArgsVisitor<'b, 'de>(&'b mut Args<'de>);

/// A key, borrowed where possible (keys with escapes are decoded into a String).
struct Key<'a>(Cow<'a, str>);

impl<'de> de::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

impl<'de> Visitor<'de> for ArgsVisitor<'_, 'de> {
    type Value = ArgsKind;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let values = &mut self.0.values;
        *values = [None; N_ARGS];
        while let Some(key) = map.next_key::<Key<'de>>()? {
            match arg_of(&key.0) {
                Some(arg) => values[arg as usize] = Some(map.next_value::<&'de RawValue>()?.get()),
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(ArgsKind::Object)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(ArgsKind::Absent)
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(ArgsKind::Wrong)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(ArgsKind::Wrong)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(ArgsKind::Wrong)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(ArgsKind::Wrong)
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Ok(ArgsKind::Wrong)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(ArgsKind::Wrong)
    }
}

/// Parses `args` into the event's `Args` in place; returns what kind of value it was.
struct ArgsSeed<'b, 'de>(&'b mut Args<'de>);

impl<'de> DeserializeSeed<'de> for ArgsSeed<'_, 'de> {
    type Value = ArgsKind;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(ArgsVisitor(self.0))
    }
}

/// The fields of one event, as found: texts decoded, every other field as its raw JSON text.
#[derive(Default, Debug, PartialEq)]
pub struct RawEvent<'a> {
    pub ph: Text<'a>,
    pub cat: Text<'a>,
    pub name: Text<'a>,
    pub pid: Option<&'a str>,
    pub tid: Option<&'a str>,
    pub ts: Option<&'a str>,
    pub dur: Option<&'a str>,
    pub id: Option<&'a str>,
    pub args: Args<'a>,
}

/// Fills an event in place (see `Args`).
struct EventVisitor<'b, 'de>(&'b mut RawEvent<'de>);

impl<'de> Visitor<'de> for EventVisitor<'_, 'de> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an event object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let ev = self.0;
        while let Some(key) = map.next_key::<Key<'de>>()? {
            match key.0.as_ref() {
                "ph" => ev.ph = map.next_value_seed(TextSeed)?,
                "cat" => ev.cat = map.next_value_seed(TextSeed)?,
                "name" => ev.name = map.next_value_seed(TextSeed)?,
                "pid" => ev.pid = Some(map.next_value::<&RawValue>()?.get()),
                "tid" => ev.tid = Some(map.next_value::<&RawValue>()?.get()),
                "ts" => ev.ts = Some(map.next_value::<&RawValue>()?.get()),
                "dur" => ev.dur = Some(map.next_value::<&RawValue>()?.get()),
                "id" => ev.id = Some(map.next_value::<&RawValue>()?.get()),
                "args" => ev.args.kind = map.next_value_seed(ArgsSeed(&mut ev.args))?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

/// Parse one element (a JSON object, valid UTF-8) into `ev` (which must be `RawEvent::default()`); Err when
/// it is not valid JSON (then `ev` holds whatever was read before the error).
pub fn parse_event_into<'a>(text: &'a str, ev: &mut RawEvent<'a>) -> Result<(), serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(text);
    de.deserialize_map(EventVisitor(ev))?;
    de.end()
}

/// Parse one element (a JSON object, valid UTF-8) into its fields; Err when it is not valid JSON.
pub fn parse_event(text: &str) -> Result<RawEvent<'_>, serde_json::Error> {
    let mut ev = RawEvent::default();
    parse_event_into(text, &mut ev)?;
    Ok(ev)
}

/// A raw JSON value, classified.
pub enum Val<'a> {
    Null,
    Num(&'a str),
    Str(Cow<'a, str>),
    Other,
}

/// `raw` is the text of one valid JSON value (as both parsers keep it).
pub fn classify(raw: Option<&str>) -> Val<'_> {
    let Some(text) = raw else { return Val::Null };
    match text.as_bytes().first() {
        // a valid string without escapes is its contents
        Some(b'"') if !text.contains('\\') && text.len() >= 2 => {
            Val::Str(Cow::Borrowed(&text[1..text.len() - 1]))
        }
        Some(b'"') => {
            let mut de = serde_json::Deserializer::from_str(text);
            match de.deserialize_any(TextVisitor) {
                Ok(Text::Str(s)) => Val::Str(s),
                _ => Val::Other,
            }
        }
        Some(b'n') => Val::Null,
        Some(b'-' | b'0'..=b'9') => Val::Num(text),
        _ => Val::Other,
    }
}

/// The elements of a raw JSON array (None when it is not an array).
pub fn array_items(raw: &str) -> Option<Vec<&str>> {
    if !raw.starts_with('[') {
        return None;
    }
    let items = serde_json::from_str::<Vec<&RawValue>>(raw).ok()?;
    Some(items.into_iter().map(RawValue::get).collect())
}

#[cfg(test)]
mod arg_key_tests {
    use super::*;

    #[test]
    fn every_key_maps_to_the_variant_at_its_position() {
        for (i, key) in ARG_KEYS.iter().enumerate() {
            assert_eq!(arg_of(key).map(|a| a as usize), Some(i), "{key}");
        }
        assert!(arg_of("no such key").is_none());
    }
}
