//! Board palettes: `'#rrggbb'` strings; a tile's value is an index into its board's palette.

use crate::bits::TileWidth;
use std::fmt;

/// The 16 colours of r/Place 2017, in its order.
pub const RPLACE_2017: [&str; 16] = [
    "#ffffff", "#e4e4e4", "#888888", "#222222", "#ffa7d1", "#e50000", "#e59500", "#a06a42",
    "#e5d900", "#94e044", "#02be01", "#00d3dd", "#0083c7", "#0000ea", "#cf6ee4", "#820080",
];

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PaletteError {
    Empty,
    TooLong { len: usize, max: usize, bits: u32 },
    NullEntry { index: usize },
    BadColour { index: usize, value: String },
}

impl fmt::Display for PaletteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PaletteError::Empty => write!(f, "palette is empty (it needs 1 or more colours)"),
            PaletteError::TooLong { len, max, bits } => write!(
                f,
                "palette has {len} colours but a {bits}-bit tile holds at most {max}"
            ),
            PaletteError::NullEntry { index } => {
                write!(f, "palette[{}] is NULL (expected '#rrggbb')", index + 1)
            }
            PaletteError::BadColour { index, value } => write!(
                f,
                "palette[{}] = '{value}' is not a colour (expected '#rrggbb', e.g. '#ff4500')",
                index + 1
            ),
        }
    }
}

impl std::error::Error for PaletteError {}

/// The palette a board gets when its creator names none: two colours for checkboxes,
/// four greys, r/Place's sixteen, and for 8 bits r/Place's sixteen followed by the
/// xterm 6×6×6 colour cube and its 24 greys.
pub fn default_palette(width: TileWidth) -> Vec<String> {
    match width.bits() {
        1 => vec!["#ffffff".into(), "#000000".into()],
        2 => ["#ffffff", "#aaaaaa", "#555555", "#000000"]
            .map(String::from)
            .to_vec(),
        4 => RPLACE_2017.map(String::from).to_vec(),
        _ => {
            let levels = [0x00, 0x5f, 0x87, 0xaf, 0xd7, 0xff];
            let mut palette: Vec<String> = RPLACE_2017.map(String::from).to_vec();
            for r in levels {
                for g in levels {
                    for b in levels {
                        palette.push(format!("#{r:02x}{g:02x}{b:02x}"));
                    }
                }
            }
            for i in 0..24 {
                let v = 8 + 10 * i;
                palette.push(format!("#{v:02x}{v:02x}{v:02x}"));
            }
            palette
        }
    }
}

/// Checks a palette given by a user and returns it in lower case.
pub fn validate_palette(
    width: TileWidth,
    entries: &[Option<String>],
) -> Result<Vec<String>, PaletteError> {
    let max = width.max_value() as usize + 1;
    if entries.is_empty() {
        return Err(PaletteError::Empty);
    }
    if entries.len() > max {
        return Err(PaletteError::TooLong {
            len: entries.len(),
            max,
            bits: width.bits(),
        });
    }
    entries
        .iter()
        .enumerate()
        .map(|(index, entry)| {
            let value = entry.as_deref().ok_or(PaletteError::NullEntry { index })?;
            let hex = value
                .strip_prefix('#')
                .filter(|h| h.len() == 6 && h.bytes().all(|b| b.is_ascii_hexdigit()));
            match hex {
                Some(_) => Ok(value.to_ascii_lowercase()),
                None => Err(PaletteError::BadColour {
                    index,
                    value: value.to_string(),
                }),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn width(bits: i64) -> TileWidth {
        TileWidth::new(bits).unwrap()
    }

    #[test]
    fn default_palettes_fill_their_width_with_valid_colours() {
        for bits in [1, 2, 4, 8] {
            let palette = default_palette(width(bits));
            assert_eq!(palette.len(), 1 << bits);
            let entries: Vec<Option<String>> = palette.iter().cloned().map(Some).collect();
            assert_eq!(validate_palette(width(bits), &entries), Ok(palette));
        }
    }

    #[test]
    fn bad_palettes_are_refused_with_the_offending_entry() {
        let some = |v: &str| Some(v.to_string());
        assert_eq!(validate_palette(width(1), &[]), Err(PaletteError::Empty));
        assert_eq!(
            validate_palette(
                width(1),
                &[some("#000000"), some("#ffffff"), some("#ff0000")]
            ),
            Err(PaletteError::TooLong {
                len: 3,
                max: 2,
                bits: 1
            })
        );
        assert_eq!(
            validate_palette(width(2), &[some("#000000"), None]),
            Err(PaletteError::NullEntry { index: 1 })
        );
        for bad in ["red", "#fff", "#gggggg", "000000", "#0000000", "#ÿÿÿÿÿÿ"] {
            assert_eq!(
                validate_palette(width(4), &[some(bad)]),
                Err(PaletteError::BadColour {
                    index: 0,
                    value: bad.into()
                })
            );
        }
        assert_eq!(
            validate_palette(width(4), &[some("#FF4500")]),
            Ok(vec!["#ff4500".into()])
        );
    }
}
