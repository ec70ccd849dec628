//! `place.bitfield_get` / `place.bitfield_set`: the packed layout for SQL users, the same as
//! Redis `BITFIELD key GET|SET u<k> #n`, except that a tile outside the bytea is an error
//! (Redis pads with zeros, which is how One Million Checkboxes' bitset grew 100x).

use crate::input::{fail, required};
use pgplace_core::bits::{BitsError, TileWidth};
use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;

fn width(bits_per_tile: Option<i32>) -> TileWidth {
    TileWidth::new(required("bits_per_tile", bits_per_tile).into()).unwrap_or_else(|e| raise(e))
}

fn raise(error: BitsError) -> ! {
    let code = match error {
        BitsError::UnsupportedWidth(_) => PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        BitsError::TileOutOfRange { .. } => PgSqlErrorCode::ERRCODE_ARRAY_ELEMENT_ERROR,
        BitsError::ValueOutOfRange { .. } => PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
    };
    fail(code, error.to_string())
}

/// Tile `n` of a packed bytea.
#[pg_extern(immutable, parallel_safe)]
fn bitfield_get(bits: Option<&[u8]>, bits_per_tile: Option<i32>, n: Option<i64>) -> i32 {
    let w = width(bits_per_tile);
    let bits = required("bits", bits);
    i32::from(w.get(bits, required("n", n)).unwrap_or_else(|e| raise(e)))
}

/// A copy of the packed bytea with tile `n` set to `value`; its length never changes.
#[pg_extern(immutable, parallel_safe)]
fn bitfield_set(
    bits: Option<&[u8]>,
    bits_per_tile: Option<i32>,
    n: Option<i64>,
    value: Option<i32>,
) -> Vec<u8> {
    let w = width(bits_per_tile);
    let mut out = required("bits", bits).to_vec();
    let (n, value) = (required("n", n), required("value", value));
    w.set(&mut out, n, value.into())
        .unwrap_or_else(|e| raise(e));
    out
}
