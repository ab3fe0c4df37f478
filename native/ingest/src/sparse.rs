//! A primitive column built from the rows that have a value: the numeric columns of the event table, and the
//! keys of its text columns (`dict.rs`). Most of the 23 numeric columns are empty on most rows (launch
//! geometry on kernels only, Python ids on Python events...), and a builder's `append_null` per empty cell cost
//! more than the values themselves; a column set on every row so far (`ts`, `ph`, `name`...) does not even keep
//! its rows, and its values become the column's buffer as they are.

use arrow_array::types::ArrowPrimitiveType;
use arrow_array::PrimitiveArray;
use arrow_buffer::{BooleanBufferBuilder, Buffer, NullBuffer, ScalarBuffer};

pub struct Sparse<T: ArrowPrimitiveType> {
    values: Vec<T::Native>,
    /// the row of each value, once a row was skipped (before that, value i is row i)
    rows: Option<Vec<u32>>,
}

impl<T: ArrowPrimitiveType> Default for Sparse<T> {
    fn default() -> Self {
        Sparse {
            values: Vec::new(),
            rows: None,
        }
    }
}

impl<T: ArrowPrimitiveType> Sparse<T> {
    /// Set `row` to `value` (rows increase from call to call; rows never set are null).
    #[inline]
    pub fn set(&mut self, row: usize, value: T::Native) {
        match &mut self.rows {
            Some(rows) => rows.push(row as u32),
            None if row == self.values.len() => {}
            None => self.keep_rows(row),
        }
        self.values.push(value);
    }

    /// The first skipped row: from now on each value keeps its row (out of line, so that `set` stays small
    /// enough to be inlined into the decoder's per-event code).
    #[cold]
    #[inline(never)]
    fn keep_rows(&mut self, row: usize) {
        let mut rows: Vec<u32> = (0..self.values.len() as u32).collect();
        rows.push(row as u32);
        self.rows = Some(rows);
    }

    /// Set `row` to `value` when there is one.
    #[inline]
    pub fn push(&mut self, row: usize, value: Option<T::Native>) {
        if let Some(v) = value {
            self.set(row, v);
        }
    }

    /// The column of `n` rows: the same buffers a builder would give (zeros under nulls, no null buffer when
    /// every row has a value). A column with no value at all shares `empty`'s buffers.
    pub fn finish(self, n: usize, empty: &Empty) -> PrimitiveArray<T> {
        if self.values.is_empty() && n > 0 {
            let (zeros, nulls) = empty.get(n);
            return PrimitiveArray::new(ScalarBuffer::new(zeros, 0, n), Some(nulls));
        }
        match self.rows {
            None if self.values.len() == n => {
                PrimitiveArray::new(ScalarBuffer::from(self.values), None)
            }
            rows => {
                let mut dense = vec![T::Native::default(); n];
                let mut valid = BooleanBufferBuilder::new(n);
                valid.append_n(n, false);
                let mut put = |row: usize, v: T::Native| {
                    dense[row] = v;
                    valid.set_bit(row, true);
                };
                match rows {
                    Some(rows) => {
                        (rows.iter().zip(&self.values)).for_each(|(&r, &v)| put(r as usize, v))
                    }
                    None => self.values.iter().enumerate().for_each(|(i, &v)| put(i, v)),
                }
                PrimitiveArray::new(
                    ScalarBuffer::from(dense),
                    Some(NullBuffer::new(valid.finish())),
                )
            }
        }
    }
}

/// The buffers of an all-null column of one batch's `n` rows (zeros, all bits clear), made once and shared by
/// every column of the batch without a value (a third of them on a typical batch: memory events, XLA ids, ...).
pub struct Empty {
    n: usize,
    buffers: std::cell::OnceCell<(Buffer, NullBuffer)>,
}

impl Empty {
    pub fn new(n: usize) -> Self {
        Empty {
            n,
            buffers: std::cell::OnceCell::new(),
        }
    }

    fn get(&self, n: usize) -> (Buffer, NullBuffer) {
        assert_eq!(
            n, self.n,
            "the shared empty column is for another number of rows"
        );
        self.buffers
            .get_or_init(|| {
                (
                    Buffer::from_vec(vec![0i64; n]), // 8 bytes a row: wide and aligned enough for every type
                    NullBuffer::new_null(n),
                )
            })
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::builder::{Int32Builder, Int64Builder};
    use arrow_array::types::{Int32Type, Int64Type};
    use arrow_array::Array;

    /// The columns are exactly the arrays the Arrow builders give (values, validity, no null buffer when
    /// nothing is missing), whether rows are set from the first one on or skipped anywhere.
    #[test]
    fn equals_arrows_builders() {
        let patterns: [&[Option<i64>]; 8] = [
            &[],
            &[None, None],
            &[Some(1), Some(-2), Some(3)],
            &[None, Some(7), None, Some(0), Some(i64::MIN)],
            &[Some(5), None],
            &[Some(5), Some(6), None, Some(8)],
            &[None],
            &[Some(0)],
        ];
        for values in patterns {
            let empty = Empty::new(values.len()); // shared, as by the columns of one batch
            let mut sparse = Sparse::<Int64Type>::default();
            let mut builder = Int64Builder::new();
            let mut narrow = Sparse::<Int32Type>::default();
            let mut narrow_builder = Int32Builder::new();
            for (row, v) in values.iter().enumerate() {
                sparse.push(row, *v);
                builder.append_option(*v);
                narrow.push(row, v.map(|v| v as i32));
                narrow_builder.append_option(v.map(|v| v as i32));
            }
            let (a, b) = (sparse.finish(values.len(), &empty), builder.finish());
            assert_eq!(a, b, "{values:?}");
            assert_eq!(a.nulls().is_some(), b.nulls().is_some(), "{values:?}");
            assert_eq!(a.values(), b.values(), "{values:?}");
            let (a, b) = (narrow.finish(values.len(), &empty), narrow_builder.finish());
            assert_eq!(a, b, "{values:?}");
            assert_eq!(a.values(), b.values(), "{values:?}");
        }
    }
}
