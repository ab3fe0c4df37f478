//! Numbers from their JSON text, exactly: times to integer nanoseconds, integers, floats.
//!
//! Kineto writes times in microseconds, often with three decimals (nanoseconds) on epoch-scale values
//! (~1.7e15 us) where a float64 would lose the last digits. So times are converted from the decimal text
//! itself: value x 1000, rounded half to even, kept only when it fits in an i64. The same rules are written
//! in `docs/ingest.md` and implemented by the Python reference reader.

/// What a JSON value became once it was read as a number of some kind.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Parsed<T> {
    Value(T),
    /// absent, or JSON `null`
    Null,
    /// a value of another type, or text that is not a number
    WrongType,
    /// a number that does not fit the column (beyond 64 bits, non-finite, ...)
    OutOfRange,
    /// a negative duration
    Negative,
}

/// A decimal number split into its parts: `-? digits . fraction e exponent`.
struct Decimal<'a> {
    negative: bool,
    int_digits: &'a [u8],
    frac_digits: &'a [u8],
    exponent: i64,
}

fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// Trim JSON whitespace (space, tab, LF, CR) from both ends.
pub fn trim_ws(text: &[u8]) -> &[u8] {
    let start = text.iter().position(|&b| !is_ws(b)).unwrap_or(text.len());
    let end = text
        .iter()
        .rposition(|&b| !is_ws(b))
        .map_or(start, |p| p + 1);
    &text[start..end.max(start)]
}

/// Parse the JSON number grammar `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`; None otherwise.
fn split_decimal(text: &[u8]) -> Option<Decimal<'_>> {
    let mut i = 0;
    let negative = text.first() == Some(&b'-');
    if negative {
        i += 1;
    }
    let int_start = i;
    while i < text.len() && text[i].is_ascii_digit() {
        i += 1;
    }
    let int_digits = &text[int_start..i];
    if int_digits.is_empty() || (int_digits.len() > 1 && int_digits[0] == b'0') {
        return None;
    }
    let mut frac_digits: &[u8] = &[];
    if i < text.len() && text[i] == b'.' {
        i += 1;
        let start = i;
        while i < text.len() && text[i].is_ascii_digit() {
            i += 1;
        }
        if i == start {
            return None;
        }
        frac_digits = &text[start..i];
    }
    let mut exponent: i64 = 0;
    if i < text.len() && (text[i] == b'e' || text[i] == b'E') {
        i += 1;
        let mut exp_negative = false;
        if i < text.len() && (text[i] == b'+' || text[i] == b'-') {
            exp_negative = text[i] == b'-';
            i += 1;
        }
        let start = i;
        while i < text.len() && text[i].is_ascii_digit() {
            // Saturate: an exponent beyond a million is out of every range below anyway.
            exponent = (exponent * 10 + i64::from(text[i] - b'0')).min(1_000_000_000);
            i += 1;
        }
        if i == start {
            return None;
        }
        if exp_negative {
            exponent = -exponent;
        }
    }
    if i != text.len() {
        return None;
    }
    Some(Decimal {
        negative,
        int_digits,
        frac_digits,
        exponent,
    })
}

/// The decimal scaled by 10^`scale`, rounded half to even, as an i64 (None when out of range).
fn scaled_integer(dec: &Decimal<'_>, scale: i64) -> Option<i64> {
    // The significant digits (leading zeros dropped) and the power of ten that applies to the last one.
    let digits = dec.int_digits.iter().chain(dec.frac_digits.iter()).copied();
    let total = dec.int_digits.len() + dec.frac_digits.len();
    let leading = digits.clone().take_while(|&d| d == b'0').count();
    let count = total - leading;
    if count == 0 {
        return Some(0);
    }
    let power = dec.exponent + scale - dec.frac_digits.len() as i64;
    // Digits kept (before the decimal point of the scaled value) and the first dropped one.
    let keep = if power >= 0 {
        count
    } else {
        (count as i64 + power).max(0) as usize
    };
    if power < 0 && (count as i64 + power) < 0 {
        return Some(0); // below a tenth of a unit: rounds to zero
    }
    let mut magnitude: u128 = 0;
    let mut significant = digits.skip(leading);
    for d in significant.by_ref().take(keep) {
        magnitude = magnitude * 10 + u128::from(d - b'0');
        if magnitude > u128::from(u64::MAX) {
            return None;
        }
    }
    if power > 0 {
        for _ in 0..power {
            magnitude *= 10;
            if magnitude > u128::from(u64::MAX) {
                return None;
            }
        }
    }
    if let Some(first) = significant.next() {
        let rest_nonzero = significant.any(|d| d != b'0');
        if first > b'5' || (first == b'5' && (rest_nonzero || magnitude % 2 == 1)) {
            magnitude += 1;
        }
    }
    let signed = if dec.negative {
        -(magnitude as i128)
    } else {
        magnitude as i128
    };
    i64::try_from(signed).ok()
}

/// One pass over the common shape `-?(0|[1-9][0-9]*)(\.[0-9]+)?` with at most `scale` decimals and at most
/// 19 digits once scaled by 10^`scale`: the exact value (it fits a u64). None for anything else (an exponent,
/// more decimals, more digits, |value| >= 2^63, text that is not a number): `split_decimal` and
/// `scaled_integer` then decide. Saves the second pass over the digits on nearly every time and id.
fn fast_decimal(text: &[u8], scale: usize) -> Option<i64> {
    let (negative, body) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    let mut v: u64 = 0;
    let mut i = 0;
    while i < body.len() && body[i].is_ascii_digit() {
        v = v.wrapping_mul(10).wrapping_add(u64::from(body[i] - b'0'));
        i += 1;
    }
    let int_len = i;
    if int_len == 0 || (int_len > 1 && body[0] == b'0') || int_len + scale > 19 {
        return None;
    }
    let mut frac_len = 0;
    if i < body.len() && body[i] == b'.' {
        i += 1;
        let start = i;
        while i < body.len() && body[i].is_ascii_digit() && i - start < scale {
            v = v * 10 + u64::from(body[i] - b'0');
            i += 1;
        }
        frac_len = i - start;
        if frac_len == 0 {
            return None;
        }
    }
    if i != body.len() {
        return None;
    }
    let v = i64::try_from(v * 10u64.pow((scale - frac_len) as u32)).ok()?;
    Some(if negative { -v } else { v })
}

/// Microseconds (JSON number text, or a string holding one) to integer nanoseconds.
pub fn micros_to_ns(text: &[u8]) -> Parsed<i64> {
    if let Some(ns) = fast_decimal(text, 3) {
        return Parsed::Value(ns);
    }
    match split_decimal(text) {
        None => Parsed::WrongType,
        Some(dec) => match scaled_integer(&dec, 3) {
            Some(ns) => Parsed::Value(ns),
            None => Parsed::OutOfRange,
        },
    }
}

/// An integer from a JSON number (integral values only) or from a string holding one (decimal, or hex
/// with `0x`; an optional `stream ` prefix, as some traces write stream ids).
pub fn integer(text: &[u8], from_string: bool) -> Parsed<i64> {
    let mut text = text;
    if from_string {
        text = trim_ws(text);
        if let Some(rest) = text.strip_prefix(b"stream ") {
            text = trim_ws(rest);
        }
        let (negative, body) = match text.strip_prefix(b"-") {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        if let Some(hex) = body
            .strip_prefix(b"0x")
            .or_else(|| body.strip_prefix(b"0X"))
        {
            if hex.is_empty() || !hex.iter().all(u8::is_ascii_hexdigit) {
                return Parsed::WrongType;
            }
            let digits = hex.iter().skip_while(|&&d| d == b'0').count();
            if digits > 16 {
                return Parsed::OutOfRange;
            }
            let mut value: i128 = 0;
            for &d in hex {
                value = value * 16 + i128::from((d as char).to_digit(16).unwrap_or(0));
            }
            let value = if negative { -value } else { value };
            return i64::try_from(value).map_or(Parsed::OutOfRange, Parsed::Value);
        }
    }
    if let Some(v) = fast_decimal(text, 0) {
        return Parsed::Value(v);
    }
    let Some(dec) = split_decimal(text) else {
        return Parsed::WrongType;
    };
    if dec.frac_digits.iter().all(|&d| d == b'0') && dec.exponent == 0 {
        return scaled_integer(&dec, 0).map_or(Parsed::OutOfRange, Parsed::Value);
    }
    // A fraction or an exponent: accepted when the value is a whole number.
    match whole_value(&dec) {
        Some(true) => scaled_integer(&dec, 0).map_or(Parsed::OutOfRange, Parsed::Value),
        Some(false) => Parsed::WrongType,
        None => Parsed::OutOfRange,
    }
}

/// Whether the decimal is a whole number (None: too large to matter, i.e. out of range).
fn whole_value(dec: &Decimal<'_>) -> Option<bool> {
    let digits: Vec<u8> = dec
        .int_digits
        .iter()
        .chain(dec.frac_digits.iter())
        .copied()
        .collect();
    let significant = digits.iter().rposition(|&d| d != b'0').map_or(0, |p| p + 1);
    if significant == 0 {
        return Some(true);
    }
    // Value = digits[..significant] x 10^(exponent - frac_len + (len - significant)).
    let power = dec.exponent - dec.frac_digits.len() as i64 + (digits.len() - significant) as i64;
    if power >= 0 {
        return if power > 40 { None } else { Some(true) };
    }
    Some(false)
}

/// A float from a JSON number or from a string holding one (finite values only).
pub fn float(text: &[u8], from_string: bool) -> Parsed<f64> {
    let text = if from_string { trim_ws(text) } else { text };
    if split_decimal(text).is_none() {
        return Parsed::WrongType;
    }
    let Ok(s) = std::str::from_utf8(text) else {
        return Parsed::WrongType;
    };
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() => Parsed::Value(v),
        Ok(_) => Parsed::OutOfRange,
        Err(_) => Parsed::WrongType,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(text: &str) -> Parsed<i64> {
        micros_to_ns(text.as_bytes())
    }

    #[test]
    fn times_exact_from_decimal_text() {
        assert_eq!(ns("1"), Parsed::Value(1000));
        assert_eq!(ns("1.5"), Parsed::Value(1500));
        assert_eq!(
            ns("1712192699123456.789"),
            Parsed::Value(1_712_192_699_123_456_789)
        );
        assert_eq!(ns("-2.25"), Parsed::Value(-2250));
        assert_eq!(ns("0.0005"), Parsed::Value(0)); // half to even
        assert_eq!(ns("0.0015"), Parsed::Value(2));
        assert_eq!(ns("0.00151"), Parsed::Value(2));
        assert_eq!(ns("0.0025"), Parsed::Value(2));
        assert_eq!(ns("0.00250001"), Parsed::Value(3));
        assert_eq!(ns("0.0000001"), Parsed::Value(0));
        assert_eq!(ns("1e3"), Parsed::Value(1_000_000));
        assert_eq!(ns("1.5E-3"), Parsed::Value(2));
        assert_eq!(ns("0"), Parsed::Value(0));
        assert_eq!(ns("-0.0"), Parsed::Value(0));
        assert_eq!(ns("9223372036854775.807"), Parsed::Value(i64::MAX));
        assert_eq!(ns("9223372036854775.808"), Parsed::OutOfRange);
        assert_eq!(ns("-9223372036854775.808"), Parsed::Value(i64::MIN));
        assert_eq!(ns("1e400"), Parsed::OutOfRange);
        assert_eq!(ns("1e-400"), Parsed::Value(0));
        assert_eq!(ns("123456789012345678901234567890"), Parsed::OutOfRange);
        assert_eq!(ns("01"), Parsed::WrongType);
        assert_eq!(ns("1."), Parsed::WrongType);
        assert_eq!(ns("abc"), Parsed::WrongType);
        assert_eq!(ns(""), Parsed::WrongType);
    }

    #[test]
    fn integers() {
        assert_eq!(integer(b"42", false), Parsed::Value(42));
        assert_eq!(integer(b"-7", false), Parsed::Value(-7));
        assert_eq!(integer(b"7.0", false), Parsed::Value(7));
        assert_eq!(integer(b"1e3", false), Parsed::Value(1000));
        assert_eq!(integer(b"7.5", false), Parsed::WrongType);
        assert_eq!(
            integer(b"9223372036854775807", false),
            Parsed::Value(i64::MAX)
        );
        assert_eq!(integer(b"9223372036854775808", false), Parsed::OutOfRange);
        assert_eq!(
            integer(b"123456789012345678901234567890", false),
            Parsed::OutOfRange
        );
        assert_eq!(integer(b" 7 ", true), Parsed::Value(7));
        assert_eq!(integer(b"stream 7", true), Parsed::Value(7));
        assert_eq!(integer(b"0x1F", true), Parsed::Value(31));
        assert_eq!(integer(b"0xFFFFFFFFFFFFFFFFF", true), Parsed::OutOfRange);
        assert_eq!(integer(b"seven", true), Parsed::WrongType);
        assert_eq!(integer(b"1e99", false), Parsed::OutOfRange);
    }

    proptest::proptest! {
        /// The one-pass parser agrees with the general one wherever it answers, on numbers and on junk.
        #[test]
        fn fast_decimal_is_exact(
            text in "-?[0-9]{0,21}(\\.[0-9]{0,5})?([eE][+-]?[0-9]{1,2})?|[-0-9.eE+ a]{0,8}",
            scale in 0usize..4,
        ) {
            if let Some(v) = fast_decimal(text.as_bytes(), scale) {
                let dec = split_decimal(text.as_bytes());
                proptest::prop_assert!(dec.is_some(), "{}", text);
                let general = scaled_integer(&dec.unwrap(), scale as i64);
                proptest::prop_assert_eq!(Some(v), general, "{}", text);
                proptest::prop_assert!(
                    dec_frac_len(text.as_bytes()) <= scale,
                    "{} has digits the scale drops", text
                );
            }
        }
    }

    fn dec_frac_len(text: &[u8]) -> usize {
        split_decimal(text).map_or(0, |d| d.frac_digits.len())
    }

    #[test]
    fn fast_path_edges() {
        // (text, scale, what the one-pass parser answers); where it answers, the general path agrees.
        for (text, scale, fast) in [
            ("9223372036854775807", 0, Some(i64::MAX)),
            ("9223372036854775808", 0, None), // >= 2^63: the general path says out of range
            ("-9223372036854775808", 0, None), // i64::MIN: the general path gives it
            ("9999999999999999999", 0, None),
            ("9223372036854775.807", 3, Some(i64::MAX)),
            ("-9223372036854775.808", 3, None),
            ("1712192699123456.789", 3, Some(1_712_192_699_123_456_789)),
            ("0.5", 3, Some(500)),
            ("-0", 0, Some(0)),
            ("0.000", 3, Some(0)),
            ("0.0005", 3, None), // a digit to round: the general path
            ("7.0", 0, None),
            ("1e3", 3, None),
            ("01", 0, None),
            ("1.", 3, None),
            ("-", 0, None),
            ("", 0, None),
        ] {
            assert_eq!(fast_decimal(text.as_bytes(), scale), fast, "{text}");
            if let Some(v) = fast {
                let dec = split_decimal(text.as_bytes()).unwrap();
                assert_eq!(Some(v), scaled_integer(&dec, scale as i64), "{text}");
            }
        }
    }

    #[test]
    fn floats() {
        assert_eq!(float(b"1.25", false), Parsed::Value(1.25));
        assert_eq!(float(b" 2 ", true), Parsed::Value(2.0));
        assert_eq!(float(b"1e400", false), Parsed::OutOfRange);
        assert_eq!(float(b"inf", true), Parsed::WrongType);
    }
}
