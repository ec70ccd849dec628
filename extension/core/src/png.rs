//! Boards as pictures: a packed board rendered to an indexed-colour PNG.
//!
//! The PNG's palette (PLTE) is the board's palette and its bit depth is the board's tile
//! width, so a pixel of the picture holds the very value of its tile. PNG packs pixels
//! narrower than a byte from the most significant bit, like our bits do, so at scale 1 a
//! row of the picture is a row of the board shifted to start on a byte boundary (PNG
//! starts every row on a byte; a board row of an odd width does not) with the unused low
//! bits of its last byte cleared.
//!
//! [`render`] takes what the `place.boards` row and `place.board_bits` give, so the SQL
//! function `place.render_png` and the gateway's `GET /boards/{id}.png` both call it as is.

use crate::bits::TileWidth;
use crate::palette::PaletteError;
use std::fmt;

/// The widest and the tallest picture [`render`] makes, in pixels.
pub const MAX_SIDE: u64 = 16_384;
/// The most pixels a picture may have (64 Mi: at 8 bits per tile, 64 MiB of raw rows).
pub const MAX_PIXELS: u64 = 64 * 1024 * 1024;

/// What to draw: `scale` pixels per tile side, and the rectangle of tiles starting at
/// (`x`, `y`), `width` × `height` tiles (None: up to the board's right or bottom edge).
///
/// The fields are signed and unchecked so that SQL `int` arguments can be passed as they
/// come: [`RenderOptions::resolve`] refuses bad values with errors that name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RenderOptions {
    pub scale: i64,
    pub x: i64,
    pub y: i64,
    pub width: Option<i64>,
    pub height: Option<i64>,
}

impl Default for RenderOptions {
    fn default() -> Self {
        RenderOptions {
            scale: 1,
            x: 0,
            y: 0,
            width: None,
            height: None,
        }
    }
}

/// The options checked against one board: a rectangle inside it, and a picture whose size
/// ([`Region::pixels`]) is within [`MAX_SIDE`] and [`MAX_PIXELS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Region {
    pub x: u32,
    pub y: u32,
    pub width: u32,
    pub height: u32,
    pub scale: u32,
}

impl Region {
    /// The picture's width and height in pixels.
    pub fn pixels(&self) -> (u32, u32) {
        (self.width * self.scale, self.height * self.scale)
    }
}

/// Why a picture could not be made. [`RenderError::sqlstate`] maps each to a SQLSTATE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RenderError {
    /// `scale` < 1.
    Scale { scale: i64 },
    /// `x` (or `y`) is not a column (row) of the board.
    Origin {
        name: &'static str,
        value: i64,
        board: u32,
    },
    /// `width` (or `height`) < 1, or the rectangle runs past the board's edge.
    Extent {
        name: &'static str,
        value: i64,
        origin: i64,
        board: u32,
    },
    /// The picture would be larger than [`MAX_SIDE`] or [`MAX_PIXELS`].
    TooLarge { width: u64, height: u64 },
    /// The bits do not have the length of a board of this size and tile width.
    BitsLength {
        len: usize,
        expected: usize,
        width: u32,
        height: u32,
        bits_per_tile: u32,
    },
    /// The palette is empty, too long for the tile width, or holds a bad colour.
    Palette(PaletteError),
    /// The PNG encoder failed (a bug, not a bad argument).
    Encode(String),
}

impl RenderError {
    /// `22023` (invalid_parameter_value) for bad arguments, `54000`
    /// (program_limit_exceeded) for a picture too large, `XX000` (internal_error) when the
    /// board's own data does not add up.
    pub fn sqlstate(&self) -> &'static str {
        match self {
            RenderError::Scale { .. }
            | RenderError::Origin { .. }
            | RenderError::Extent { .. }
            | RenderError::Palette(_) => "22023",
            RenderError::TooLarge { .. } => "54000",
            RenderError::BitsLength { .. } | RenderError::Encode(_) => "XX000",
        }
    }

    /// True when the caller's arguments are at fault (HTTP 400), false for a fault of the
    /// board's data or of the encoder (HTTP 500).
    pub fn is_bad_argument(&self) -> bool {
        matches!(
            self,
            RenderError::Scale { .. }
                | RenderError::Origin { .. }
                | RenderError::Extent { .. }
                | RenderError::TooLarge { .. }
        )
    }
}

impl fmt::Display for RenderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RenderError::Scale { scale } => {
                write!(f, "scale = {scale} is not allowed (scale >= 1)")
            }
            RenderError::Origin { name, value, board } => {
                let side = if *name == "x" { "width" } else { "height" };
                write!(
                    f,
                    "{name} = {value} is outside the board (0 <= {name} <= {} for a board of {side} {board})",
                    i64::from(*board) - 1
                )
            }
            RenderError::Extent {
                name,
                value,
                origin,
                board,
            } => {
                let start = if *name == "width" { "x" } else { "y" };
                let room = i64::from(*board) - origin;
                write!(
                    f,
                    "{name} = {value} does not fit the board (1 <= {name} <= {room} when {start} = {origin}, the board's {name} being {board})"
                )
            }
            RenderError::TooLarge { width, height } => write!(
                f,
                "the picture would be {width}×{height} pixels; the limit is {MAX_SIDE} pixels a side and {MAX_PIXELS} pixels in all (lower scale or crop a smaller rectangle)"
            ),
            RenderError::BitsLength {
                len,
                expected,
                width,
                height,
                bits_per_tile,
            } => write!(
                f,
                "the bits hold {len} bytes but a {width}×{height} board of {bits_per_tile}-bit tiles needs {expected}"
            ),
            RenderError::Palette(error) => write!(f, "{error}"),
            RenderError::Encode(error) => write!(f, "the PNG encoder failed: {error}"),
        }
    }
}

impl std::error::Error for RenderError {}

impl RenderOptions {
    /// Checks the options against a `board_width` × `board_height` board.
    pub fn resolve(&self, board_width: u32, board_height: u32) -> Result<Region, RenderError> {
        if self.scale < 1 {
            return Err(RenderError::Scale { scale: self.scale });
        }
        let region = self.crop(board_width, board_height)?;
        let (w, h) = (
            u64::from(region.width).saturating_mul(self.scale as u64),
            u64::from(region.height).saturating_mul(self.scale as u64),
        );
        if w > MAX_SIDE || h > MAX_SIDE || w * h > MAX_PIXELS {
            return Err(RenderError::TooLarge {
                width: w,
                height: h,
            });
        }
        Ok(Region {
            scale: self.scale as u32,
            ..region
        })
    }

    /// The rectangle of tiles alone, checked against the board (no picture's limits: for
    /// readers of tiles, `tiles_at`), at scale 1.
    pub fn crop(&self, board_width: u32, board_height: u32) -> Result<Region, RenderError> {
        let (x, width) = span("x", "width", self.x, self.width, board_width)?;
        let (y, height) = span("y", "height", self.y, self.height, board_height)?;
        Ok(Region {
            x,
            y,
            width,
            height,
            scale: 1,
        })
    }
}

/// One axis of the crop: the first tile and the count, inside `0..board`.
fn span(
    origin_name: &'static str,
    extent_name: &'static str,
    origin: i64,
    extent: Option<i64>,
    board: u32,
) -> Result<(u32, u32), RenderError> {
    if origin < 0 || origin >= i64::from(board) {
        return Err(RenderError::Origin {
            name: origin_name,
            value: origin,
            board,
        });
    }
    let room = i64::from(board) - origin;
    let extent = extent.unwrap_or(room);
    if extent < 1 || extent > room {
        return Err(RenderError::Extent {
            name: extent_name,
            value: extent,
            origin,
            board,
        });
    }
    Ok((origin as u32, extent as u32))
}

/// The PLTE chunk: the palette's colours, then black up to the tile width's 2^k entries,
/// so that no tile value can point past the palette (PNG decoders reject such pixels).
fn plte(tile: TileWidth, palette: &[String]) -> Result<Vec<u8>, RenderError> {
    let entries = tile.max_value() as usize + 1;
    if palette.is_empty() {
        return Err(RenderError::Palette(PaletteError::Empty));
    }
    if palette.len() > entries {
        return Err(RenderError::Palette(PaletteError::TooLong {
            len: palette.len(),
            max: entries,
            bits: tile.bits(),
        }));
    }
    let mut out = vec![0u8; entries * 3];
    for (index, colour) in palette.iter().enumerate() {
        let rgb = parse_colour(colour).ok_or_else(|| {
            RenderError::Palette(PaletteError::BadColour {
                index,
                value: colour.clone(),
            })
        })?;
        out[index * 3..index * 3 + 3].copy_from_slice(&rgb);
    }
    Ok(out)
}

/// `"#rrggbb"` (either case) → [r, g, b].
fn parse_colour(colour: &str) -> Option<[u8; 3]> {
    let hex = colour.strip_prefix('#')?;
    if hex.len() != 6 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let byte = |i: usize| u8::from_str_radix(&hex[i..i + 2], 16).ok();
    Some([byte(0)?, byte(2)?, byte(4)?])
}

/// Renders a `width` × `height` board of `tile`-bit tiles packed in `bits` (the layout of
/// [`crate::bits`]) to a PNG whose PLTE is `palette` (`'#rrggbb'` strings).
pub fn render(
    bits: &[u8],
    width: u32,
    height: u32,
    tile: TileWidth,
    palette: &[String],
    opts: &RenderOptions,
) -> Result<Vec<u8>, RenderError> {
    let region = opts.resolve(width, height)?;
    let plte = plte(tile, palette)?;
    let expected = tile.packed_len(u64::from(width) * u64::from(height));
    if bits.len() != expected {
        return Err(RenderError::BitsLength {
            len: bits.len(),
            expected,
            width,
            height,
            bits_per_tile: tile.bits(),
        });
    }
    let (out_width, out_height) = region.pixels();
    let mut png = Vec::new();
    let encode = |png: &mut Vec<u8>| -> Result<(), ::png::EncodingError> {
        let mut encoder = ::png::Encoder::new(&mut *png, out_width, out_height);
        encoder.set_color(::png::ColorType::Indexed);
        encoder.set_depth(match tile.bits() {
            1 => ::png::BitDepth::One,
            2 => ::png::BitDepth::Two,
            4 => ::png::BitDepth::Four,
            _ => ::png::BitDepth::Eight,
        });
        encoder.set_palette(&plte[..]);
        // Encoding alone, measured on a 1000×1000×4 board of large one-colour areas:
        // fdeflate with the "Up" filter takes 0.25 ms (60 kB), zlib level 6 4 ms (11 kB);
        // at scale 4, 1 ms (144 kB) against 19 ms (37 kB). fdeflate only compresses well
        // what a filter turned into zeros (Up makes each repeated row of a scaled picture
        // all zeros): with no filter it stores the rows about as they are.
        encoder.set_deflate_compression(::png::DeflateCompression::FdeflateUltraFast);
        encoder.set_filter(::png::Filter::Up);
        let mut writer = encoder.write_header()?;
        // Streamed a row at a time: the rows of the picture (up to 64 MiB) never exist
        // all at once, only one row and the compressed output.
        let mut stream = writer.stream_writer()?;
        for_each_row(bits, width as usize, tile, &region, |row| {
            std::io::Write::write_all(&mut stream, row)
        })?;
        stream.finish()?;
        writer.finish()
    };
    encode(&mut png).map_err(|e| RenderError::Encode(e.to_string()))?;
    Ok(png)
}

/// Scales up to this use a table from a byte of tiles to its `scale` bytes of pixels
/// (256 × scale bytes); larger ones draw tile by tile (their rows have few tiles).
const MAX_TABLE_SCALE: usize = 64;

/// Calls `sink` with each row of the picture as PNG wants it before filtering: starting
/// on a byte, its unused low bits zero. A row of tiles is drawn once and given `scale`
/// times.
///
/// A row of tiles is first copied to start on a byte (`copy_shifted`). Scaled, every
/// byte of it (8/k tiles of k bits) becomes exactly `scale` bytes of pixels (8/k tiles ×
/// `scale` pixels × k bits), whatever k: one table lookup per byte.
fn for_each_row<E>(
    bits: &[u8],
    board_width: usize,
    tile: TileWidth,
    region: &Region,
    mut sink: impl FnMut(&[u8]) -> Result<(), E>,
) -> Result<(), E> {
    let k = tile.bits() as usize;
    let scale = region.scale as usize;
    let tiles = region.width as usize;
    let tile_bytes = (tiles * k).div_ceil(8);
    let row_bytes = (tiles * scale * k).div_ceil(8);
    let mut aligned = vec![0u8; tile_bytes];
    // Table rows: the last byte of tiles may expand past `row_bytes` (into zeros).
    let mut row = vec![0u8; tile_bytes * scale];
    let table = (scale > 1 && scale <= MAX_TABLE_SCALE).then(|| expansion_table(k, scale));
    let mut values = vec![0u8; if table.is_none() { tiles } else { 0 }];
    for r in 0..region.height as usize {
        let first = (region.y as usize + r) * board_width + region.x as usize;
        if scale == 1 {
            copy_shifted(bits, first * k, tiles * k, &mut aligned);
            for _ in 0..scale {
                sink(&aligned)?;
            }
            continue;
        }
        match &table {
            Some(table) => {
                copy_shifted(bits, first * k, tiles * k, &mut aligned);
                // Fixed sizes for the usual scales: a copy of N bytes becomes one move
                // instead of a call to memcpy per byte of tiles.
                match scale {
                    2 => expand::<2>(&aligned, table, &mut row),
                    3 => expand::<3>(&aligned, table, &mut row),
                    4 => expand::<4>(&aligned, table, &mut row),
                    8 => expand::<8>(&aligned, table, &mut row),
                    16 => expand::<16>(&aligned, table, &mut row),
                    _ => {
                        for (byte, out) in aligned.iter().zip(row.chunks_exact_mut(scale)) {
                            let at = usize::from(*byte) * scale;
                            out.copy_from_slice(&table[at..at + scale]);
                        }
                    }
                }
            }
            None => {
                unpack(bits, k, first, &mut values);
                row.fill(0);
                pack_runs(&values, k, scale, &mut row);
            }
        }
        for _ in 0..scale {
            sink(&row[..row_bytes])?;
        }
    }
    Ok(())
}

/// `row` = the table entries of the bytes of `aligned`, for a scale of N.
fn expand<const N: usize>(aligned: &[u8], table: &[u8], row: &mut [u8]) {
    let (table, _) = table.as_chunks::<N>();
    let (row, _) = row.as_chunks_mut::<N>();
    for (byte, out) in aligned.iter().zip(row.iter_mut()) {
        *out = table[usize::from(*byte)];
    }
}

/// For each byte of k-bit tiles, its `scale` bytes of pixels.
fn expansion_table(k: usize, scale: usize) -> Vec<u8> {
    let mut table = vec![0u8; 256 * scale];
    let mut values = vec![0u8; 8 / k];
    for (byte, out) in table.chunks_exact_mut(scale).enumerate() {
        unpack(&[byte as u8], k, 0, &mut values);
        pack_runs(&values, k, scale, out);
    }
    table
}

/// Copies `len` bits of `bits` starting at bit `from` into `out` (from its first bit),
/// clearing the bits of `out`'s last byte past `len`.
fn copy_shifted(bits: &[u8], from: usize, len: usize, out: &mut [u8]) {
    let byte = from / 8;
    let shift = from % 8;
    if shift == 0 {
        out.copy_from_slice(&bits[byte..byte + out.len()]);
    } else {
        let src = &bits[byte..];
        for (i, o) in out.iter_mut().enumerate() {
            let next = src.get(i + 1).copied().unwrap_or(0);
            *o = (src[i] << shift) | (next >> (8 - shift));
        }
    }
    let used = len % 8;
    if used != 0 {
        if let Some(last) = out.last_mut() {
            *last &= 0xFFu8 << (8 - used);
        }
    }
}

/// Tiles `first..first + out.len()` of `bits`, one value a byte.
fn unpack(bits: &[u8], k: usize, first: usize, out: &mut [u8]) {
    if k == 8 {
        out.copy_from_slice(&bits[first..first + out.len()]);
        return;
    }
    let mask = ((1u16 << k) - 1) as u8;
    for (i, o) in out.iter_mut().enumerate() {
        let bit = (first + i) * k;
        *o = (bits[bit / 8] >> (8 - k - bit % 8)) & mask;
    }
}

/// Writes each value `scale` times, `k` bits each, into the zeroed row `out`.
fn pack_runs(values: &[u8], k: usize, scale: usize, out: &mut [u8]) {
    // The value repeated across a byte: any k-aligned window of it is the value repeated.
    let spread: u8 = match k {
        1 => 0xFF,
        2 => 0x55,
        4 => 0x11,
        _ => 0x01,
    };
    if (scale * k).is_multiple_of(8) {
        // Each tile fills whole bytes (always at 8 bits; at scale 2, 4, 8 at 4 bits...).
        for (value, run) in values.iter().zip(out.chunks_exact_mut(scale * k / 8)) {
            run.fill(value.wrapping_mul(spread));
        }
        return;
    }
    let mut bit = 0usize;
    for &value in values {
        let pattern = value.wrapping_mul(spread);
        let mut left = scale * k;
        // The head: up to the next byte boundary.
        let offset = bit % 8;
        if offset != 0 {
            let room = 8 - offset;
            let take = room.min(left);
            let mask = (((1u16 << take) - 1) as u8) << (room - take);
            out[bit / 8] |= pattern & mask;
            bit += take;
            left -= take;
        }
        // Whole bytes.
        let whole = left / 8;
        if whole > 0 {
            out[bit / 8..bit / 8 + whole].fill(pattern);
            bit += whole * 8;
            left -= whole * 8;
        }
        // The tail, at the start of a byte.
        if left > 0 {
            out[bit / 8] |= pattern & (0xFFu8 << (8 - left));
            bit += left;
        }
    }
}

/// A PNG read back as one palette index a pixel (row by row), with its palette: for
/// tests and tools that check a rendered picture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    pub width: u32,
    pub height: u32,
    pub bit_depth: u8,
    pub palette: Vec<[u8; 3]>,
    pub indices: Vec<u8>,
}

/// Decodes an indexed-colour PNG without expanding its palette.
pub fn decode(png: &[u8]) -> Result<Decoded, String> {
    let mut decoder = ::png::Decoder::new(std::io::Cursor::new(png));
    decoder.set_transformations(::png::Transformations::IDENTITY);
    let mut reader = decoder.read_info().map_err(|e| e.to_string())?;
    let palette = reader
        .info()
        .palette
        .as_ref()
        .ok_or("the PNG has no palette")?
        .chunks_exact(3)
        .map(|c| [c[0], c[1], c[2]])
        .collect();
    let size = reader
        .output_buffer_size()
        .ok_or("the PNG is too large to decode")?;
    let mut buf = vec![0u8; size];
    let info = reader.next_frame(&mut buf).map_err(|e| e.to_string())?;
    if info.color_type != ::png::ColorType::Indexed {
        return Err(format!("the PNG is {:?}, not indexed", info.color_type));
    }
    let k = info.bit_depth as usize;
    let mut indices = Vec::with_capacity(info.width as usize * info.height as usize);
    for row in buf.chunks_exact(info.line_size).take(info.height as usize) {
        for i in 0..info.width as usize {
            let bit = i * k;
            indices.push((row[bit / 8] >> (8 - k - bit % 8)) & (((1u16 << k) - 1) as u8));
        }
    }
    Ok(Decoded {
        width: info.width,
        height: info.height,
        bit_depth: k as u8,
        palette,
        indices,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::palette::default_palette;

    /// A board with a deterministic, varied pattern of values.
    fn board(width: u32, height: u32, tile: TileWidth, seed: u64) -> Vec<u8> {
        let tiles = u64::from(width) * u64::from(height);
        let mut bits = vec![0u8; tile.packed_len(tiles)];
        let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        for n in 0..tiles {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let value = (state % (u64::from(tile.max_value()) + 1)) as i64;
            tile.set(&mut bits, n as i64, value).unwrap();
        }
        bits
    }

    fn rgb(colour: &str) -> [u8; 3] {
        parse_colour(colour).unwrap()
    }

    /// Renders and checks every pixel against the bits (index and colour).
    fn check(width: u32, height: u32, k: i64, opts: RenderOptions) {
        let tile = TileWidth::new(k).unwrap();
        let palette = default_palette(tile);
        let bits = board(
            width,
            height,
            tile,
            u64::from(width * 31 + height) + k as u64,
        );
        let png = render(&bits, width, height, tile, &palette, &opts)
            .unwrap_or_else(|e| panic!("{width}x{height}x{k} {opts:?}: {e}"));
        let region = opts.resolve(width, height).unwrap();
        let decoded = decode(&png).unwrap();
        let (pw, ph) = region.pixels();
        assert_eq!((decoded.width, decoded.height), (pw, ph));
        assert_eq!(u32::from(decoded.bit_depth), tile.bits());
        assert_eq!(decoded.palette.len(), 1 << k);
        for (i, colour) in palette.iter().enumerate() {
            assert_eq!(decoded.palette[i], rgb(colour));
        }
        for py in 0..ph {
            for px in 0..pw {
                let tx = region.x + px / region.scale;
                let ty = region.y + py / region.scale;
                let n = i64::from(ty) * i64::from(width) + i64::from(tx);
                let want = tile.get(&bits, n).unwrap();
                let got = decoded.indices[(py * pw + px) as usize];
                assert_eq!(
                    got, want,
                    "{width}x{height}x{k} {opts:?}: pixel ({px}, {py}) = tile ({tx}, {ty})"
                );
                assert_eq!(decoded.palette[got as usize], rgb(&palette[want as usize]));
            }
        }
    }

    fn crop(scale: i64, x: i64, y: i64, w: Option<i64>, h: Option<i64>) -> RenderOptions {
        RenderOptions {
            scale,
            x,
            y,
            width: w,
            height: h,
        }
    }

    #[test]
    fn every_pixel_is_its_tile_for_every_width_and_odd_sizes() {
        for k in [1, 2, 4, 8] {
            for (w, h) in [
                (1, 1),
                (1, 7),
                (3, 5),
                (7, 3),
                (8, 2),
                (9, 4),
                (13, 11),
                (64, 3),
            ] {
                check(w, h, k, RenderOptions::default());
            }
        }
    }

    #[test]
    fn crops_at_unaligned_origins_and_widths() {
        for k in [1, 2, 4, 8] {
            for (x, y, w, h) in [
                (0, 0, Some(1), Some(1)),
                (1, 2, Some(5), Some(3)),
                (3, 0, None, None),
                (7, 5, Some(6), None),
                (12, 10, None, Some(1)),
                (5, 1, Some(8), Some(9)),
            ] {
                check(13, 11, k, crop(1, x, y, w, h));
            }
        }
    }

    #[test]
    fn scale_repeats_each_tile_in_a_square() {
        for k in [1, 2, 4, 8] {
            // 2, 3, 4, 8, 16: fixed-size table copies; 5, 9: any size; 70: no table.
            for scale in [2, 3, 4, 5, 8, 9, 16, 70] {
                check(7, 5, k, crop(scale, 0, 0, None, None));
                check(13, 11, k, crop(scale, 3, 2, Some(5), Some(4)));
            }
        }
    }

    #[test]
    fn a_short_palette_is_padded_and_pixels_still_decode() {
        let tile = TileWidth::new(4).unwrap();
        let palette = vec!["#ff0000".to_string(), "#00FF00".to_string()];
        let bits = vec![0x01, 0x10];
        let png = render(&bits, 2, 2, tile, &palette, &RenderOptions::default()).unwrap();
        let decoded = decode(&png).unwrap();
        assert_eq!(decoded.indices, vec![0, 1, 1, 0]);
        assert_eq!(decoded.palette.len(), 16);
        assert_eq!(
            &decoded.palette[..3],
            &[[255, 0, 0], [0, 255, 0], [0, 0, 0]]
        );
    }

    #[test]
    fn bad_arguments_are_refused_with_clear_messages() {
        let tile = TileWidth::new(4).unwrap();
        let palette = default_palette(tile);
        let bits = vec![0u8; 10 * 6 / 2];
        let err = |opts: RenderOptions| {
            render(&bits, 10, 6, tile, &palette, &opts)
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            err(crop(0, 0, 0, None, None)),
            "scale = 0 is not allowed (scale >= 1)"
        );
        assert_eq!(
            err(crop(-3, 0, 0, None, None)),
            "scale = -3 is not allowed (scale >= 1)"
        );
        assert_eq!(
            err(crop(1, 10, 0, None, None)),
            "x = 10 is outside the board (0 <= x <= 9 for a board of width 10)"
        );
        assert_eq!(
            err(crop(1, 0, -1, None, None)),
            "y = -1 is outside the board (0 <= y <= 5 for a board of height 6)"
        );
        assert_eq!(
            err(crop(1, 4, 0, Some(7), None)),
            "width = 7 does not fit the board (1 <= width <= 6 when x = 4, the board's width being 10)"
        );
        assert_eq!(
            err(crop(1, 0, 2, None, Some(0))),
            "height = 0 does not fit the board (1 <= height <= 4 when y = 2, the board's height being 6)"
        );
        assert_eq!(
            err(crop(2000, 0, 0, None, None)),
            "the picture would be 20000×12000 pixels; the limit is 16384 pixels a side and 67108864 pixels in all (lower scale or crop a smaller rectangle)"
        );
        assert!(matches!(
            render(
                &bits,
                10,
                6,
                tile,
                &palette,
                &crop(i64::MAX, 0, 0, None, None)
            ),
            Err(RenderError::TooLarge { .. })
        ));
        assert_eq!(
            render(&bits[1..], 10, 6, tile, &palette, &RenderOptions::default())
                .unwrap_err()
                .to_string(),
            "the bits hold 29 bytes but a 10×6 board of 4-bit tiles needs 30"
        );
        let bad = vec!["#ffffff".to_string(), "red".to_string()];
        let e = render(&bits, 10, 6, tile, &bad, &RenderOptions::default()).unwrap_err();
        assert_eq!(e.sqlstate(), "22023");
        assert_eq!(
            e.to_string(),
            "palette[2] = 'red' is not a colour (expected '#rrggbb', e.g. '#ff4500')"
        );
        let long = default_palette(TileWidth::new(8).unwrap());
        assert!(matches!(
            render(&bits, 10, 6, tile, &long, &RenderOptions::default()),
            Err(RenderError::Palette(PaletteError::TooLong { .. }))
        ));
        assert!(matches!(
            render(&bits, 10, 6, tile, &[], &RenderOptions::default()),
            Err(RenderError::Palette(PaletteError::Empty))
        ));
    }

    #[test]
    fn the_size_limits_are_inclusive() {
        // 4096 × 4 = 16384 pixels wide: allowed; one more tile is not.
        let ok = crop(4, 0, 0, None, None).resolve(4096, 1).unwrap();
        assert_eq!(ok.pixels(), (16384, 4));
        assert!(crop(4, 0, 0, None, None).resolve(4097, 1).is_err());
        // 8192 × 8192 = 64 Mi pixels: allowed; 8192 × 8193 is over the side limit anyway.
        assert!(crop(8, 0, 0, None, None).resolve(1024, 1024).is_ok());
        assert!(crop(9, 0, 0, None, None).resolve(1024, 1024).is_err());
    }

    /// `cargo test -p pgplace-core --release png::tests::timing -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn timing() {
        let tile = TileWidth::new(4).unwrap();
        let palette = default_palette(tile);
        let bits = board(1000, 1000, tile, 7);
        // Mostly a few large regions, like a real board; and noise, the worst case.
        let mut blocks = vec![0u8; bits.len()];
        for n in 0..1_000_000i64 {
            let (x, y) = (n % 1000, n / 1000);
            tile.set(&mut blocks, n, (x / 100 + y / 250) % 16).unwrap();
        }
        for (name, bits) in [("blocks", &blocks), ("noise", &bits)] {
            // 8: 8000×8000, the largest picture allowed (64 Mi pixels).
            for scale in [1, 4, 8] {
                let opts = crop(scale, 0, 0, None, None);
                let runs = 10;
                let started = std::time::Instant::now();
                let mut size = 0;
                for _ in 0..runs {
                    size = render(bits, 1000, 1000, tile, &palette, &opts)
                        .unwrap()
                        .len();
                }
                let each = started.elapsed() / runs;
                println!("1000x1000x4 {name} scale {scale}: {each:?} a render, {size} bytes");
            }
        }
    }
}
