//! pgplace-core: what the extension and the gateway must agree on, with no Postgres in it.
//!
//! # Layout
//! - [`bits`]: the packed-tile layout (Redis `BITFIELD u<k> #n`), get and set.
//! - [`palette`]: default palettes and the validation of `'#rrggbb'` colours.
//! - [`palette_names`]: the colours' names, their defaults and their validation.
//! - [`payload`]: the NOTIFY channel and payload format, encode and decode.
//! - [`png`]: a packed board rendered to an indexed-colour PNG.

pub mod array_literal;
pub mod bits;
pub mod palette;
pub mod palette_names;
pub mod payload;
pub mod png;
