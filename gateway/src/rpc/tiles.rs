//! What both the board methods and the session methods check of a tile.

use crate::errors::RpcError;
use crate::mirror::snapshot::Settings;

/// Refuses a tile outside the board.
pub fn check_inside(settings: &Settings, x: i32, y: i32) -> Result<(), RpcError> {
    if x < 0 || x >= settings.width || y < 0 || y >= settings.height {
        return Err(RpcError::invalid_params(format!(
            "({x}, {y}) is outside board {}, which is {}x{} (x in 0..{}, y in 0..{})",
            settings.name,
            settings.width,
            settings.height,
            settings.width - 1,
            settings.height - 1
        )));
    }
    Ok(())
}
