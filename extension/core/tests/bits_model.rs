//! `TileWidth::get`/`set` against the plainest possible model: one bit at a time.

use pgplace_core::bits::{BitsError, TileWidth};
use proptest::prelude::*;

/// Bit `i` of `buf`, counted from the most significant bit of byte 0.
fn model_bit(buf: &[u8], i: u64) -> u8 {
    (buf[(i / 8) as usize] >> (7 - i % 8)) & 1
}

fn model_get(buf: &[u8], bits: u32, n: u64) -> u8 {
    (0..u64::from(bits)).fold(0, |acc, k| {
        (acc << 1) | model_bit(buf, n * u64::from(bits) + k)
    })
}

fn model_set(buf: &mut [u8], bits: u32, n: u64, value: u8) {
    for k in 0..u64::from(bits) {
        let i = n * u64::from(bits) + k;
        let bit = (value >> (bits as u64 - 1 - k)) & 1;
        let byte = &mut buf[(i / 8) as usize];
        *byte = (*byte & !(1 << (7 - i % 8))) | (bit << (7 - i % 8));
    }
}

fn width_and_buffer() -> impl Strategy<Value = (u32, Vec<u8>)> {
    (
        prop::sample::select(vec![1u32, 2, 4, 8]),
        prop::collection::vec(any::<u8>(), 0..64),
    )
}

proptest! {
    #[test]
    fn get_matches_the_model((bits, buf) in width_and_buffer(), n in -4i64..600) {
        let w = TileWidth::new(bits.into()).unwrap();
        let tiles = buf.len() as u64 * 8 / u64::from(bits);
        if n >= 0 && (n as u64) < tiles {
            prop_assert_eq!(w.get(&buf, n), Ok(model_get(&buf, bits, n as u64)));
        } else {
            prop_assert_eq!(w.get(&buf, n), Err(BitsError::TileOutOfRange { n, tiles }));
        }
    }

    #[test]
    fn set_matches_the_model(
        (bits, buf) in width_and_buffer(),
        writes in prop::collection::vec((-4i64..600, -2i64..300), 1..40),
    ) {
        let w = TileWidth::new(bits.into()).unwrap();
        let tiles = buf.len() as u64 * 8 / u64::from(bits);
        let max = (1i64 << bits) - 1;
        let mut ours = buf.clone();
        let mut model = buf.clone();
        for (n, value) in writes {
            let result = w.set(&mut ours, n, value);
            let n_ok = n >= 0 && (n as u64) < tiles;
            if n_ok && (0..=max).contains(&value) {
                prop_assert_eq!(result, Ok(()));
                model_set(&mut model, bits, n as u64, value as u8);
            } else {
                prop_assert!(result.is_err());
            }
            prop_assert_eq!(&ours, &model);
            prop_assert_eq!(ours.len(), buf.len());
        }
    }
}
