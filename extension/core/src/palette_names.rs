//! The names of a board's colours ("red", not "#e50000"), which pages show beside each
//! swatch and say when a tile is placed: one per palette entry, NULL for a colour
//! without one (a page then shows its code).

use crate::bits::TileWidth;
use std::fmt;

/// The names of r/Place 2017's sixteen colours, in `palette::RPLACE_2017`'s order.
pub const RPLACE_2017_NAMES: [&str; 16] = [
    "white",
    "light grey",
    "grey",
    "black",
    "pink",
    "red",
    "orange",
    "brown",
    "yellow",
    "light green",
    "green",
    "cyan",
    "blue",
    "dark blue",
    "magenta",
    "purple",
];

/// A name fits a swatch's tooltip and a one-line message.
pub const MAX_NAME_CHARS: usize = 40;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NamesError {
    /// One name per colour: a palette of `colours` needs as many names.
    Length {
        names: usize,
        colours: usize,
    },
    Blank {
        index: usize,
    },
    TooLong {
        index: usize,
        chars: usize,
    },
    Control {
        index: usize,
    },
}

impl fmt::Display for NamesError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NamesError::Length { names, colours } => write!(
                f,
                "names needs one entry per colour: the palette has {colours}, names has {names} (NULL for a colour without a name)"
            ),
            NamesError::Blank { index } => write!(
                f,
                "names[{}] is blank (use NULL for a colour without a name)",
                index + 1
            ),
            NamesError::TooLong { index, chars } => write!(
                f,
                "names[{}] has {chars} characters (at most {MAX_NAME_CHARS})",
                index + 1
            ),
            NamesError::Control { index } => {
                write!(f, "names[{}] contains a control character", index + 1)
            }
        }
    }
}

impl std::error::Error for NamesError {}

/// The names of `palette::default_palette(width)`'s colours: every colour of the 1-, 2-
/// and 4-bit palettes; for 8 bits r/Place's sixteen, and the colour cube and greys that
/// follow them unnamed.
pub fn default_palette_names(width: TileWidth) -> Vec<Option<String>> {
    let named = |names: &[&str]| names.iter().map(|n| Some(n.to_string())).collect();
    match width.bits() {
        1 => named(&["white", "black"]),
        2 => named(&["white", "light grey", "dark grey", "black"]),
        4 => named(&RPLACE_2017_NAMES),
        _ => {
            let mut names: Vec<Option<String>> = named(&RPLACE_2017_NAMES);
            names.resize(1 << width.bits(), None);
            names
        }
    }
}

/// Checks names given for a palette of `colours` colours.
pub fn validate_palette_names(colours: usize, names: &[Option<String>]) -> Result<(), NamesError> {
    if names.len() != colours {
        return Err(NamesError::Length {
            names: names.len(),
            colours,
        });
    }
    for (index, name) in names.iter().enumerate() {
        let Some(name) = name else { continue };
        let chars = name.chars().count();
        if name.trim().is_empty() {
            return Err(NamesError::Blank { index });
        }
        if chars > MAX_NAME_CHARS {
            return Err(NamesError::TooLong { index, chars });
        }
        if name.chars().any(char::is_control) {
            return Err(NamesError::Control { index });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::palette::default_palette;

    fn width(bits: i64) -> TileWidth {
        TileWidth::new(bits).unwrap()
    }

    #[test]
    fn default_names_fit_the_default_palettes() {
        for bits in [1, 2, 4, 8] {
            let names = default_palette_names(width(bits));
            let palette = default_palette(width(bits));
            assert_eq!(names.len(), palette.len());
            assert_eq!(validate_palette_names(palette.len(), &names), Ok(()));
        }
        let four = default_palette(width(4));
        let names = default_palette_names(width(4));
        let red = four.iter().position(|c| c == "#e50000").unwrap();
        assert_eq!(names[red].as_deref(), Some("red"));
        let eight = default_palette_names(width(8));
        assert_eq!(eight[15].as_deref(), Some("purple"));
        assert_eq!(eight[16], None);
    }

    #[test]
    fn bad_names_are_refused_with_the_offending_entry() {
        let some = |v: &str| Some(v.to_string());
        assert_eq!(
            validate_palette_names(2, &[some("white")]),
            Err(NamesError::Length {
                names: 1,
                colours: 2
            })
        );
        assert_eq!(
            validate_palette_names(2, &[None, some("  ")]),
            Err(NamesError::Blank { index: 1 })
        );
        let long = "x".repeat(MAX_NAME_CHARS + 1);
        assert_eq!(
            validate_palette_names(1, &[Some(long)]),
            Err(NamesError::TooLong {
                index: 0,
                chars: MAX_NAME_CHARS + 1
            })
        );
        assert_eq!(
            validate_palette_names(1, &[some("red\nblue")]),
            Err(NamesError::Control { index: 0 })
        );
        assert_eq!(validate_palette_names(2, &[some("rouge"), None]), Ok(()));
        assert_eq!(
            validate_palette_names(1, &[Some("é".repeat(MAX_NAME_CHARS))]),
            Ok(())
        );
    }
}
