//! The scanner's fast path inside an event: 64 bytes at a time, the way simdjson's first stage finds
//! structure. For a block it builds bit masks of the quotes, backslashes, opening (`{` `[`) and closing
//! (`}` `]`) brackets; a prefix XOR of the quotes marks the bytes inside strings; only the brackets outside
//! strings are then visited, one set bit at a time. A Kineto event (~230 bytes, ~25 strings, ~6 brackets)
//! costs a few blocks instead of a state change per string. SSE2 is part of x86-64 itself, so every x86-64
//! build uses it; other targets build the masks byte by byte (same result, tested against each other).

/// Bytes that matter between tokens inside an event: 0 = skip, else the kind.
pub const QUOTE: u8 = 1;
pub const OPEN: u8 = 2;
pub const CLOSE: u8 = 3;

pub static OUTSIDE: [u8; 256] = {
    let mut t = [0u8; 256];
    t[b'"' as usize] = QUOTE;
    t[b'{' as usize] = OPEN;
    t[b'[' as usize] = OPEN;
    t[b'}' as usize] = CLOSE;
    t[b']' as usize] = CLOSE;
    t
};

/// Bytes that matter inside strings.
pub static IN_STRING: [bool; 256] = {
    let mut t = [false; 256];
    t[b'"' as usize] = true;
    t[b'\\' as usize] = true;
    t
};

/// One 64-byte block: bit k stands for byte k.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Masks {
    pub quote: u64,
    pub backslash: u64,
    pub open: u64,
    pub close: u64,
}

/// The masks of `block` (SSE2 on x86-64).
#[inline]
pub fn masks(block: &[u8; 64]) -> Masks {
    simd::masks(block)
}

/// The masks of `block`, byte by byte: the reference for the SIMD version, and the version elsewhere.
pub fn scalar_masks(block: &[u8; 64]) -> Masks {
    let mut m = Masks {
        quote: 0,
        backslash: 0,
        open: 0,
        close: 0,
    };
    for (k, &b) in block.iter().enumerate() {
        let bit = 1u64 << k;
        match b {
            b'"' => m.quote |= bit,
            b'\\' => m.backslash |= bit,
            b'{' | b'[' => m.open |= bit,
            b'}' | b']' => m.close |= bit,
            _ => {}
        }
    }
    m
}

/// Bit k of the result is the XOR of bits 0..=k of `x`: over the quote bits, 1 from an opening quote up to
/// (not including) its closing quote.
#[inline]
pub fn prefix_xor(mut x: u64) -> u64 {
    x ^= x << 1;
    x ^= x << 2;
    x ^= x << 4;
    x ^= x << 8;
    x ^= x << 16;
    x ^= x << 32;
    x
}

#[cfg(target_arch = "x86_64")]
mod simd {
    use super::Masks;
    use std::arch::x86_64::{
        __m128i, _mm_and_si128, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_set1_epi8,
    };

    #[inline(always)]
    pub fn masks(block: &[u8; 64]) -> Masks {
        // SAFETY: SSE2 is always enabled on x86-64; each load reads 16 bytes at offsets 0, 16, 32, 48 of a
        // 64-byte array (unaligned loads).
        unsafe {
            // `{` 0x7b / `[` 0x5b and `}` 0x7d / `]` 0x5d differ only in bit 5: clearing it maps each pair
            // onto one value, and no other byte lands there.
            let fold = _mm_set1_epi8(0xdfu8 as i8);
            let quote = _mm_set1_epi8(b'"' as i8);
            let backslash = _mm_set1_epi8(b'\\' as i8);
            let open = _mm_set1_epi8(b'[' as i8);
            let close = _mm_set1_epi8(b']' as i8);
            let mut m = Masks {
                quote: 0,
                backslash: 0,
                open: 0,
                close: 0,
            };
            for part in 0..4 {
                let v = _mm_loadu_si128(block.as_ptr().add(16 * part).cast::<__m128i>());
                let folded = _mm_and_si128(v, fold);
                let shift = 16 * part;
                m.quote |= (_mm_movemask_epi8(_mm_cmpeq_epi8(v, quote)) as u16 as u64) << shift;
                m.backslash |=
                    (_mm_movemask_epi8(_mm_cmpeq_epi8(v, backslash)) as u16 as u64) << shift;
                m.open |= (_mm_movemask_epi8(_mm_cmpeq_epi8(folded, open)) as u16 as u64) << shift;
                m.close |=
                    (_mm_movemask_epi8(_mm_cmpeq_epi8(folded, close)) as u16 as u64) << shift;
            }
            m
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod simd {
    use super::Masks;

    #[inline(always)]
    pub fn masks(block: &[u8; 64]) -> Masks {
        super::scalar_masks(block)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_value_at_every_position() {
        for b in 0..=255u8 {
            for at in 0..64 {
                let mut block = [b'a'; 64];
                block[at] = b;
                block[(at + 17) % 64] = b'"';
                assert_eq!(masks(&block), scalar_masks(&block), "byte {b} at {at}");
            }
        }
        let all: [u8; 64] = std::array::from_fn(|k| (k * 4 + 3) as u8);
        assert_eq!(masks(&all), scalar_masks(&all));
    }

    #[test]
    fn prefix_xor_marks_the_inside_of_strings() {
        let block: &[u8; 64] =
            br#"{"name": "a{b}", "args": {"x": [1]}}                            "#;
        let m = masks(block);
        let inside = prefix_xor(m.quote);
        let outside_brackets: Vec<usize> = (0..64)
            .filter(|&k| ((m.open | m.close) & !inside) >> k & 1 == 1)
            .collect();
        assert_eq!(outside_brackets, vec![0, 25, 31, 33, 34, 35]);
    }
}
