//! Property tests of the scanner and decoder (run by `cargo test`, bounded case counts, so CI runs them):
//! any chunking gives the same result, any prefix salvages exactly the complete events before the cut, and
//! arbitrary bytes never panic.

use opscope_ingest::decode::decode_batch;
use opscope_ingest::event::{parse_event, RawEvent};
use opscope_ingest::fast::parse_event_fast;
use opscope_ingest::number::{micros_to_ns, Parsed};
use opscope_ingest::scan::Scanner;
use proptest::prelude::*;

fn scan(doc: &[u8], chunk: usize) -> (Vec<(Vec<u8>, u8)>, opscope_ingest::Outline) {
    let mut s = Scanner::new(64);
    for piece in doc.chunks(chunk.max(1)) {
        s.feed(piece);
    }
    s.finish();
    let mut out = Vec::new();
    for batch in s.take_batches() {
        for e in &batch.elements {
            out.push((batch.data[e.start..e.end].to_vec(), e.flags));
        }
        // decoding any batch must not panic
        let _ = decode_batch(&batch);
    }
    (out, s.outline)
}

fn event() -> impl Strategy<Value = String> {
    (
        "[a-z:<> ]{0,12}",
        prop_oneof![Just("kernel"), Just("cpu_op"), Just("cuda_runtime"), Just("ac2g")],
        0u64..2_000_000_000_000_000,
        0u32..1000,
        0i64..100_000,
        prop::bool::ANY,
    )
        .prop_map(|(name, cat, ts, frac, dur, args)| {
            let args = if args {
                format!(r#", "args": {{"External id": {dur}, "grid": [1, 2, 3], "s": "}},{{\"", "l": [[{{}}]]}}"#)
            } else {
                String::new()
            };
            format!(
                r#"{{"ph": "X", "cat": "{cat}", "name": "{name}", "pid": 0, "tid": 7, "ts": {ts}.{frac:03}, "dur": {dur}{args}}}"#
            )
        })
}

/// Text that looks like an event: an object of JSON tokens in any order, right or wrong (escapes, control
/// characters, bad numbers and literals, trailing commas, deep nesting, the keys the decoder reads).
fn event_like() -> impl Strategy<Value = String> {
    let token = prop_oneof![
        Just("{"),
        Just("}"),
        Just("["),
        Just("]"),
        Just(","),
        Just(":"),
        Just(" "),
        Just("\n  "),
        Just(r#""ph""#),
        Just(r#""cat""#),
        Just(r#""name""#),
        Just(r#""pid""#),
        Just(r#""ts""#),
        Just(r#""dur""#),
        Just(r#""id""#),
        Just(r#""args""#),
        Just(r#""stream""#),
        Just(r#""grid""#),
        Just(r#""External id""#),
        Just(r#""x""#),
        Just(r#""a\"b""#),
        Just(r#""\u00e9""#),
        Just("\"\t\""),
        Just(r#""é€""#),
        Just(r#""a\q""#),
        Just("0"),
        Just("-12"),
        Just("1.5"),
        Just("3e-7"),
        Just("-0.0E+2"),
        Just("01"),
        Just("1."),
        Just("1e"),
        Just("-"),
        Just(".5"),
        Just("true"),
        Just("false"),
        Just("null"),
        Just("tru"),
        Just("nul"),
        Just("1712192699123456.789"),
    ];
    prop::collection::vec(token, 0..40).prop_map(|tokens| format!("{{{}", tokens.concat()))
}

/// The fast parser either hands the text to serde or gives exactly what serde gives.
fn fast_agrees_with_serde(text: &str) -> Result<(), TestCaseError> {
    let mut ev = RawEvent::default();
    if parse_event_fast(text, &mut ev) {
        match parse_event(text) {
            Ok(reference) => prop_assert_eq!(ev, reference, "{}", text),
            Err(e) => prop_assert!(false, "fast parsed what serde rejects ({}): {}", e, text),
        }
    }
    Ok(())
}

fn document() -> impl Strategy<Value = String> {
    prop::collection::vec(event(), 0..20).prop_map(|events| {
        format!(
            r#"{{"schemaVersion": 1, "traceEvents": [{}], "deviceProperties": [{{"id": 0}}]}}"#,
            events.join(",\n  ")
        )
    })
}

/// Independent count: objects of the events array whose closing brace lies before `limit`.
fn complete_events(doc: &[u8], limit: usize) -> usize {
    let start = doc
        .windows(15)
        .position(|w| w == b"\"traceEvents\": ")
        .map_or(0, |p| p + 16);
    let (mut depth, mut count, mut in_str, mut esc) = (0i32, 0usize, false, false);
    for &ch in &doc[start..limit.max(start)] {
        if in_str {
            if esc {
                esc = false;
            } else if ch == b'\\' {
                esc = true;
            } else if ch == b'"' {
                in_str = false;
            }
        } else if ch == b'"' {
            in_str = true;
        } else if ch == b'{' || ch == b'[' {
            depth += 1;
        } else if ch == b'}' || ch == b']' {
            depth -= 1;
            if depth == 0 {
                count += 1;
            }
            if depth < 0 {
                break;
            }
        }
    }
    count
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn the_fast_parser_agrees_with_serde(text in event_like()) {
        fast_agrees_with_serde(&text)?;
    }

    #[test]
    fn the_fast_parser_takes_plain_events(text in event()) {
        let text = text.replace(r#"\""#, "'"); // without escapes
        let mut ev = RawEvent::default();
        prop_assert!(parse_event_fast(&text, &mut ev), "{}", text);
        prop_assert_eq!(ev, parse_event(&text).unwrap());
    }

    #[test]
    fn the_fast_parser_agrees_on_damaged_events(text in event(), at in 0usize..400, byte in 0u8..128) {
        let mut bytes = text.into_bytes();
        let at = at % bytes.len();
        bytes[at] = byte;
        fast_agrees_with_serde(std::str::from_utf8(&bytes).unwrap())?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn any_chunking_gives_the_same_elements(doc in document(), chunk in 1usize..97) {
        let (one, outline) = scan(doc.as_bytes(), doc.len());
        let (many, o2) = scan(doc.as_bytes(), chunk);
        prop_assert_eq!(&one, &many);
        prop_assert_eq!(outline.members, o2.members);
        prop_assert_eq!(outline.salvaged_up_to, o2.salvaged_up_to);
        prop_assert!(outline.closed && outline.document_closed);
        prop_assert!(one.iter().all(|(_, flags)| *flags == 0));
    }

    /// Chunks shorter than 64 bytes never take the scanner's 64-byte block path, a whole document does:
    /// both must cut the same elements with the same flags (junk, nesting, strings across blocks).
    #[test]
    fn the_block_path_equals_the_byte_path(body in "[{}\\[\\]\",: a1]{0,700}", chunk in 1usize..64) {
        let doc = format!("{{\"traceEvents\": [{body}], \"k\": 1}}");
        let (one, o1) = scan(doc.as_bytes(), doc.len());
        let (many, o2) = scan(doc.as_bytes(), chunk);
        prop_assert_eq!(&one, &many);
        prop_assert_eq!(o1.salvaged_up_to, o2.salvaged_up_to);
        prop_assert_eq!(o1.members, o2.members);
        prop_assert_eq!((o1.closed, o1.document_closed), (o2.closed, o2.document_closed));
        prop_assert_eq!(o1.malformed_after_events_at, o2.malformed_after_events_at);
        prop_assert_eq!(o1.trailing_data_at, o2.trailing_data_at);
    }

    /// Nesting around the limit (`MAX_DEPTH`), with strings holding brackets and escaped quotes, padded so
    /// that the brackets fall anywhere in a block.
    #[test]
    fn deep_events_are_flagged_alike_on_both_paths(
        depth in 55usize..75, pad in 0usize..130, escaped in prop::bool::ANY, chunk in 1usize..64,
    ) {
        let text = if escaped { r#""a\"]}{""# } else { r#""]}{[""# };
        let event = format!(
            "{{\"name\": {text}, \"args\": {}{}{}}}",
            "[".repeat(depth), " ".repeat(pad), "]".repeat(depth)
        );
        let doc = format!("{{\"traceEvents\": [{event}, {{\"ph\": \"X\"}}, {event}]}}");
        let (one, _) = scan(doc.as_bytes(), doc.len());
        let (many, _) = scan(doc.as_bytes(), chunk);
        prop_assert_eq!(&one, &many);
        prop_assert_eq!(one.len(), 3);
        prop_assert_eq!(one[0].1 != 0, depth + 1 > opscope_ingest::scan::MAX_DEPTH as usize);
    }

    #[test]
    fn a_prefix_keeps_exactly_the_complete_events(doc in document(), cut in 0.0f64..1.0, chunk in 1usize..4096) {
        let limit = ((doc.len() as f64) * cut) as usize;
        let prefix = &doc.as_bytes()[..limit];
        let (elements, _) = scan(prefix, chunk);
        let kept = elements.iter().filter(|(_, flags)| *flags == 0).count();
        prop_assert_eq!(kept, complete_events(doc.as_bytes(), limit));
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..400), chunk in 1usize..50) {
        let _ = scan(&bytes, chunk);
        let mut doc = b"{\"traceEvents\": [".to_vec();
        doc.extend_from_slice(&bytes);
        let _ = scan(&doc, chunk);
    }

    #[test]
    fn flipped_bytes_never_panic(doc in document(), at in 0usize..10_000, byte in any::<u8>()) {
        let mut bytes = doc.into_bytes();
        if !bytes.is_empty() {
            let i = at % bytes.len();
            bytes[i] = byte;
        }
        let _ = scan(&bytes, 13);
    }

    #[test]
    fn times_match_integer_arithmetic(whole in 0u64..9_000_000_000_000_000, frac in 0u32..1000) {
        let text = format!("{}.{:03}", whole / 1000, frac);
        let expected = i64::try_from(u128::from(whole / 1000) * 1000 + u128::from(frac)).ok();
        let got = match micros_to_ns(text.as_bytes()) { Parsed::Value(v) => Some(v), _ => None };
        prop_assert_eq!(got, expected);
    }
}
