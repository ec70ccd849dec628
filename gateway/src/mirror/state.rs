//! A board's state as JSON: what `board.get` answers and a board view's initial state.

use crate::mirror::snapshot::Settings;
use base64::Engine;
use bytes::Bytes;
use serde::Serialize;

#[derive(Serialize)]
struct SettingsWithSeq<'a> {
    #[serde(flatten)]
    settings: &'a Settings,
    seq: i64,
}

/// A board's state as `board.get` and a board view's initial state give it.
#[derive(Serialize, schemars::JsonSchema)]
pub struct BoardState<'a> {
    #[serde(flatten)]
    pub settings: &'a Settings,
    pub seq: i64,
    /// The packed tiles (`bits_per_tile` each, row by row), base64.
    pub bits: String,
    /// The frozen tiles, one bit each (None without freeze_after).
    pub frozen: Option<String>,
    /// Subscriptions watching the board, as last told.
    pub watching: u64,
}

pub(super) fn settings_json(settings: &Settings, seq: i64) -> String {
    serde_json::to_string(&SettingsWithSeq { settings, seq }).expect("settings serialize")
}

/// `{"id":…,"name":…,…,"seq":…,"bits":"<base64>","frozen":"<base64>"|null,"watching":…}`.
pub fn state_json(
    settings: &Settings,
    seq: i64,
    bits: &[u8],
    frozen: Option<&[u8]>,
    watching: u64,
) -> Bytes {
    let base64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    serde_json::to_vec(&BoardState {
        settings,
        seq,
        bits: base64(bits),
        frozen: frozen.map(base64),
        watching,
    })
    .expect("states serialize")
    .into()
}
