//! Packed tiles, laid out like Redis `BITFIELD key SET u<k> #n`: tile `n` occupies bits
//! `[n*k, (n+1)*k)` counted from the most significant bit of byte 0. With k ∈ {1, 2, 4, 8}
//! a tile never straddles two bytes, so every access touches exactly one byte.

use std::fmt;

/// The tile widths a board may use: checkboxes, 4 colours, 16 colours, 256 colours.
pub const SUPPORTED_BITS_PER_TILE: [u32; 4] = [1, 2, 4, 8];

/// Why a packed-bits access was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BitsError {
    UnsupportedWidth(i64),
    TileOutOfRange { n: i64, tiles: u64 },
    ValueOutOfRange { value: i64, max: u32 },
}

impl fmt::Display for BitsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BitsError::UnsupportedWidth(bits) => {
                write!(
                    f,
                    "bits_per_tile = {bits} is not supported (allowed: 1, 2, 4, 8)"
                )
            }
            BitsError::TileOutOfRange { n, tiles } if *tiles == 0 => {
                write!(f, "tile n = {n} is outside the bytea, which holds no tile")
            }
            BitsError::TileOutOfRange { n, tiles } => write!(
                f,
                "tile n = {n} is outside the bytea (0 <= n <= {})",
                tiles - 1
            ),
            BitsError::ValueOutOfRange { value, max } => {
                write!(
                    f,
                    "value = {value} does not fit the tile (0 <= value <= {max})"
                )
            }
        }
    }
}

impl std::error::Error for BitsError {}

/// A validated tile width.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TileWidth(u32);

impl TileWidth {
    pub fn new(bits: i64) -> Result<Self, BitsError> {
        match bits {
            1 | 2 | 4 | 8 => Ok(TileWidth(bits as u32)),
            _ => Err(BitsError::UnsupportedWidth(bits)),
        }
    }

    pub fn bits(self) -> u32 {
        self.0
    }

    /// The largest value a tile can hold.
    pub fn max_value(self) -> u32 {
        (1u32 << self.0) - 1
    }

    pub fn tiles_per_byte(self) -> u64 {
        u64::from(8 / self.0)
    }

    /// Bytes needed for `tiles` tiles, the last byte padded with zero bits.
    pub fn packed_len(self, tiles: u64) -> usize {
        tiles.div_ceil(self.tiles_per_byte()) as usize
    }

    /// How many whole tiles a buffer of `len` bytes holds.
    pub fn tiles_in(self, len: usize) -> u64 {
        len as u64 * self.tiles_per_byte()
    }

    fn locate(self, n: u64) -> (usize, u32) {
        let byte = (n / self.tiles_per_byte()) as usize;
        let shift = 8 - self.0 - (n % self.tiles_per_byte()) as u32 * self.0;
        (byte, shift)
    }

    fn check(self, buf: &[u8], n: i64) -> Result<u64, BitsError> {
        let tiles = self.tiles_in(buf.len());
        if n < 0 || n as u64 >= tiles {
            return Err(BitsError::TileOutOfRange { n, tiles });
        }
        Ok(n as u64)
    }

    /// Tile `n` of `buf`.
    pub fn get(self, buf: &[u8], n: i64) -> Result<u8, BitsError> {
        let n = self.check(buf, n)?;
        let (byte, shift) = self.locate(n);
        Ok((buf[byte] >> shift) & self.max_value() as u8)
    }

    /// Writes `value` into tile `n` of `buf`; the buffer's length never changes.
    pub fn set(self, buf: &mut [u8], n: i64, value: i64) -> Result<(), BitsError> {
        let n = self.check(buf, n)?;
        if value < 0 || value > i64::from(self.max_value()) {
            return Err(BitsError::ValueOutOfRange {
                value,
                max: self.max_value(),
            });
        }
        let (byte, shift) = self.locate(n);
        let mask = (self.max_value() as u8) << shift;
        buf[byte] = (buf[byte] & !mask) | ((value as u8) << shift);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn even_tile_is_the_high_nibble_like_redis_u4() {
        let w = TileWidth::new(4).unwrap();
        let mut buf = vec![0u8; 2];
        w.set(&mut buf, 0, 0xA).unwrap();
        w.set(&mut buf, 1, 0x3).unwrap();
        w.set(&mut buf, 3, 0xF).unwrap();
        assert_eq!(buf, vec![0xA3, 0x0F]);
        assert_eq!(w.get(&buf, 0), Ok(0xA));
        assert_eq!(w.get(&buf, 3), Ok(0xF));
    }

    #[test]
    fn one_bit_tiles_count_from_the_most_significant_bit() {
        let w = TileWidth::new(1).unwrap();
        let mut buf = vec![0u8; 1];
        w.set(&mut buf, 0, 1).unwrap();
        w.set(&mut buf, 7, 1).unwrap();
        assert_eq!(buf, vec![0b1000_0001]);
    }

    #[test]
    fn out_of_range_access_is_refused_and_changes_nothing() {
        let w = TileWidth::new(2).unwrap();
        let mut buf = vec![0x55u8; 3];
        assert_eq!(
            w.set(&mut buf, 12, 1),
            Err(BitsError::TileOutOfRange { n: 12, tiles: 12 })
        );
        assert_eq!(
            w.set(&mut buf, -1, 1),
            Err(BitsError::TileOutOfRange { n: -1, tiles: 12 })
        );
        assert_eq!(
            w.set(&mut buf, 0, 4),
            Err(BitsError::ValueOutOfRange { value: 4, max: 3 })
        );
        assert_eq!(buf, vec![0x55u8; 3]);
    }

    #[test]
    fn widths_other_than_1_2_4_8_are_unsupported() {
        for bits in [-1, 0, 3, 5, 16, i64::MAX] {
            assert_eq!(TileWidth::new(bits), Err(BitsError::UnsupportedWidth(bits)));
        }
    }

    #[test]
    fn packed_len_rounds_up_to_whole_bytes() {
        assert_eq!(TileWidth::new(4).unwrap().packed_len(1_000_000), 500_000);
        assert_eq!(TileWidth::new(1).unwrap().packed_len(9), 2);
        assert_eq!(TileWidth::new(8).unwrap().packed_len(3), 3);
    }
}
