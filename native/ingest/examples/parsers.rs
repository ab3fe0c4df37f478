//! Parse step alone: serde_json (the reader's `event::parse_event`) against sonic-rs with the same visitor
//! shape (text fields borrowed, known fields as raw text, the rest validated and skipped), over the elements
//! of the first batches of FILE. Reports this thread's CPU time. `cargo run --release --example parsers -- FILE`
use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use opscope_ingest::{decode, event, scan, source};
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

fn thread_cpu_ns() -> u64 {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap();
    s.split_whitespace().next().unwrap().parse().unwrap()
}

#[derive(Default)]
struct Raw<'a> {
    ph: Option<Cow<'a, str>>,
    cat: Option<Cow<'a, str>>,
    name: Option<Cow<'a, str>>,
    pid: Option<&'a str>,
    tid: Option<&'a str>,
    ts: Option<&'a str>,
    dur: Option<&'a str>,
    id: Option<&'a str>,
    args: [Option<&'a str>; 21],
}

struct RawText<'a>(&'a str);
impl<'de> de::Deserialize<'de> for RawText<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawText<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("raw")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(RawText(v))
            }
            fn visit_str<E: de::Error>(self, _v: &str) -> Result<Self::Value, E> {
                Ok(RawText(""))
            }
        }
        d.deserialize_newtype_struct("$sonic_rs::LazyValue", V)
    }
}

struct Key<'a>(Cow<'a, str>);
impl<'de> de::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KV;
        impl<'de> Visitor<'de> for KV {
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
        d.deserialize_str(KV)
    }
}

struct TextSeed;
impl<'de> DeserializeSeed<'de> for TextSeed {
    type Value = Option<Cow<'de, str>>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        struct TV;
        impl<'de> Visitor<'de> for TV {
            type Value = Option<Cow<'de, str>>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Some(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Some(Cow::Owned(v.to_owned())))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Self::Value, A::Error> {
                while s.next_element::<IgnoredAny>()?.is_some() {}
                Ok(None)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
                while m.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(None)
            }
        }
        d.deserialize_any(TV)
    }
}

fn arg_of(key: &str) -> Option<usize> {
    Some(match key {
        "External id" => 0,
        "external id" => 1,
        "correlation" => 2,
        "stream" => 3,
        "device" => 4,
        "grid" => 5,
        "block" => 6,
        "registers per thread" => 7,
        "shared memory" => 8,
        "blocks per SM" => 9,
        "warps per SM" => 10,
        "est. achieved occupancy %" => 11,
        "bytes" => 12,
        "memory bandwidth (GB/s)" => 13,
        "Input Dims" => 14,
        "Input dims" => 15,
        "Input type" => 16,
        "Sequence number" => 17,
        "Python id" => 18,
        "Python parent id" => 19,
        "name" => 20,
        _ => return None,
    })
}

struct ArgsSeed;
impl<'de> DeserializeSeed<'de> for ArgsSeed {
    type Value = [Option<&'de str>; 21];
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        struct AV;
        impl<'de> Visitor<'de> for AV {
            type Value = [Option<&'de str>; 21];
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("args")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
                let mut v = [None; 21];
                while let Some(k) = m.next_key::<Key<'de>>()? {
                    match arg_of(&k.0) {
                        Some(i) => v[i] = Some(m.next_value::<RawText<'de>>()?.0),
                        None => {
                            m.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(v)
            }
        }
        d.deserialize_any(AV)
    }
}

struct EV;
impl<'de> Visitor<'de> for EV {
    type Value = Raw<'de>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("event")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
        let mut ev = Raw::default();
        while let Some(k) = m.next_key::<Key<'de>>()? {
            match k.0.as_ref() {
                "ph" => ev.ph = m.next_value_seed(TextSeed)?,
                "cat" => ev.cat = m.next_value_seed(TextSeed)?,
                "name" => ev.name = m.next_value_seed(TextSeed)?,
                "pid" => ev.pid = Some(m.next_value::<RawText<'de>>()?.0),
                "tid" => ev.tid = Some(m.next_value::<RawText<'de>>()?.0),
                "ts" => ev.ts = Some(m.next_value::<RawText<'de>>()?.0),
                "dur" => ev.dur = Some(m.next_value::<RawText<'de>>()?.0),
                "id" => ev.id = Some(m.next_value::<RawText<'de>>()?.0),
                "args" => ev.args = m.next_value_seed(ArgsSeed)?,
                _ => {
                    m.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(ev)
    }
}

fn sonic_parse(text: &str) -> Result<Raw<'_>, sonic_rs::Error> {
    let mut de = sonic_rs::Deserializer::from_str(text);
    let ev = de.deserialize_map(EV)?;
    de.end()?;
    Ok(ev)
}

fn main() {
    let path = std::path::PathBuf::from(std::env::args().nth(1).expect("FILE"));
    let mut scanner = scan::Scanner::new(4 << 20);
    let mut batches = Vec::new();
    source::read_chunks(&path, 4 << 20, Arc::default(), &mut |c| {
        scanner.feed(c);
        batches.extend(scanner.take_batches());
        batches.len() < 40
    })
    .unwrap();
    let texts: Vec<&str> = batches
        .iter()
        .flat_map(|b| {
            b.elements
                .iter()
                .filter(|e| e.flags == 0)
                .map(|e| std::str::from_utf8(&b.data[e.start..e.end]).unwrap())
        })
        .collect();
    println!("{} elements", texts.len());
    if std::env::var("DECODE_ONLY").is_ok() {
        for _ in 0..5 {
            let t = thread_cpu_ns();
            let rows: usize = batches
                .iter()
                .map(|b| decode::decode_batch(b).unwrap().0.num_rows())
                .sum();
            let c = thread_cpu_ns() - t;
            println!(
                "decode_batch {:.1} ns/event ({rows} rows)",
                c as f64 / texts.len() as f64
            );
        }
        return;
    }
    // agreement check on the raw fields
    let mut differ = 0;
    for t in &texts {
        let a = event::parse_event(t).ok();
        let b = sonic_parse(t).ok();
        match (a, b) {
            (Some(a), Some(b)) => {
                if a.ts.map(|r| r.get()) != b.ts
                    || a.args.get(event::Arg::Correlation).map(|r| r.get()) != b.args[2]
                {
                    differ += 1;
                }
            }
            (None, None) => {}
            _ => differ += 1,
        }
    }
    println!("differ {differ}");
    for round in 0..3 {
        let t = thread_cpu_ns();
        let mut n = 0usize;
        for s in &texts {
            n += event::parse_event(s)
                .map(|e| e.ts.is_some() as usize)
                .unwrap_or(0);
        }
        let a = thread_cpu_ns() - t;
        let t = thread_cpu_ns();
        let mut m = 0usize;
        for s in &texts {
            m += sonic_parse(s).map(|e| e.ts.is_some() as usize).unwrap_or(0);
        }
        let b = thread_cpu_ns() - t;
        let t = thread_cpu_ns();
        let rows: usize = batches
            .iter()
            .map(|b| decode::decode_batch(b).unwrap().0.num_rows())
            .sum();
        let c = thread_cpu_ns() - t;
        println!(
            "round {round}: decode_batch {:.1} ns/event ({rows} rows)",
            c as f64 / texts.len() as f64
        );
        println!(
            "round {round}: serde_json {:.1} ns/event, sonic-rs {:.1} ns/event ({n} {m})",
            a as f64 / texts.len() as f64,
            b as f64 / texts.len() as f64
        );
    }
}
