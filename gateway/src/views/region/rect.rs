//! A rectangle of a board, and cutting it out of the board's packed tiles (a row of
//! bytes at a time where the rows allow it).

use pgplace_core::bits::TileWidth;
use serde::Serialize;

/// A rectangle of tiles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Rect {
    pub x: i32,
    pub y: i32,
    pub width: i32,
    pub height: i32,
}

impl Rect {
    pub(super) fn tiles(&self) -> i64 {
        self.width as i64 * self.height as i64
    }

    pub(super) fn contains(&self, x: i32, y: i32) -> bool {
        x >= self.x && y >= self.y && x - self.x < self.width && y - self.y < self.height
    }

    /// The part inside a board of `width` × `height` (empty when none is).
    pub(super) fn clip(&self, width: i32, height: i32) -> Rect {
        Rect {
            x: self.x,
            y: self.y,
            width: (width - self.x).clamp(0, self.width),
            height: (height - self.y).clamp(0, self.height),
        }
    }
}

/// A board's tiles as the region copies read them: packed `tile` bits a tile, rows `width`
/// tiles long.
#[derive(Clone, Copy)]
pub(super) struct Packed<'a> {
    pub(super) bits: &'a [u8],
    pub(super) width: i32,
    pub(super) tile: TileWidth,
}

/// The rectangle `rect` of `board`, packed on its own.
pub(super) fn cut(board: Packed, rect: Rect) -> Vec<u8> {
    let mut out = vec![0u8; packed_len(rect, board.tile)];
    copy_rows(board, rect, 0..rect.height, &mut out);
    out
}

pub(super) fn packed_len(rect: Rect, tile: TileWidth) -> usize {
    (rect.tiles().max(0) * tile.bits() as i64 + 7) as usize / 8
}

/// Copies the rows `rows` of the rectangle `rect` of `board` into `out` (the rectangle
/// packed on its own): a row at a time where the rows are whole bytes of the board (4-bit
/// boards at even columns and widths, 8-bit boards always), tile by tile otherwise.
pub(super) fn copy_rows(board: Packed, rect: Rect, rows: std::ops::Range<i32>, out: &mut [u8]) {
    if !copy_byte_rows(board, rect, rows.clone(), out) {
        copy_tile_by_tile(board, rect, rows, out);
    }
}

/// `copy_rows` when every row of `rect` is whole bytes of the board (false otherwise, and
/// nothing copied).
pub(super) fn copy_byte_rows(
    board: Packed,
    rect: Rect,
    rows: std::ops::Range<i32>,
    out: &mut [u8],
) -> bool {
    let k = board.tile.bits() as i64;
    let row_bits = rect.width as i64 * k;
    if (rect.x as i64 * k) % 8 != 0 || row_bits % 8 != 0 || (board.width as i64 * k) % 8 != 0 {
        return false;
    }
    let row_bytes = (row_bits / 8) as usize;
    let source = |row: i64| {
        let first_tile = rect.x as i64 + board.width as i64 * (rect.y as i64 + row);
        let start = (first_tile * k / 8) as usize;
        board.bits.get(start..start + row_bytes)
    };
    if rows.clone().any(|row| source(row as i64).is_none()) {
        return false;
    }
    for row in rows {
        let to = row as usize * row_bytes;
        out[to..to + row_bytes].copy_from_slice(source(row as i64).expect("checked"));
    }
    true
}

pub(super) fn copy_tile_by_tile(
    board: Packed,
    rect: Rect,
    rows: std::ops::Range<i32>,
    out: &mut [u8],
) {
    let tile = board.tile;
    for row in rows {
        for col in 0..rect.width {
            let n = (rect.x + col) as i64 + board.width as i64 * (rect.y + row) as i64;
            let color = tile.get(board.bits, n).unwrap_or(0);
            let m = col as i64 + rect.width as i64 * row as i64;
            tile.set(out, m, color.into())
                .expect("the rectangle's buffer holds its tiles");
        }
    }
}

#[cfg(test)]
pub(super) fn cut_tile_by_tile(board: Packed, rect: Rect) -> Vec<u8> {
    let mut out = vec![0u8; packed_len(rect, board.tile)];
    copy_tile_by_tile(board, rect, 0..rect.height, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_by_byte_rows_is_the_cut_tile_by_tile() {
        for k in [1, 2, 4, 8] {
            let tile = TileWidth::new(k).unwrap();
            let (width, height) = (24, 10);
            let mut bits = vec![0u8; (width * height * k as i32 / 8) as usize];
            for n in 0..(width * height) as i64 {
                tile.set(&mut bits, n, (n * 7 + 3) % (1 << k)).unwrap();
            }
            let board = Packed {
                bits: &bits,
                width,
                tile,
            };
            for (x, y, w, h) in [(0, 0, 24, 10), (8, 2, 8, 3), (2, 1, 6, 4), (3, 0, 5, 2)] {
                let rect = Rect {
                    x,
                    y,
                    width: w,
                    height: h,
                };
                assert_eq!(
                    cut(board, rect),
                    cut_tile_by_tile(board, rect),
                    "{k} bits, {rect:?}"
                );
            }
        }
    }
}
