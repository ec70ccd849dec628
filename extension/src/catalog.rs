//! Which relations of schema `place` this database has: the schema's version, asked of the
//! catalog cache (no statement), for code that serves older schemas too.

use pgrx::pg_sys;
use std::ffi::CStr;

/// The oid of relation `name` in schema `place`, if there is one.
pub fn place_relation(name: &CStr) -> Option<pg_sys::Oid> {
    // SAFETY: catalog cache lookups by name, valid in any transaction.
    unsafe {
        let place = pg_sys::get_namespace_oid(c"place".as_ptr(), true);
        if place == pg_sys::InvalidOid {
            return None;
        }
        let oid = pg_sys::get_relname_relid(name.as_ptr(), place);
        (oid != pg_sys::InvalidOid).then_some(oid)
    }
}

/// Whether the schema keeps chunk and cooldown versions (0.6.0 and later; both came in one
/// update).
pub fn chunk_versions_exist() -> bool {
    place_relation(c"chunk_versions").is_some()
}

/// Whether placements leave the chunks to folds (0.8.4 and later: [`crate::folds`]).
pub fn chunk_folds_exist() -> bool {
    place_relation(c"chunk_folds").is_some()
}

/// Whether a board's settings have a table of their own and its seq comes from the history
/// (0.5.0 and later).
pub fn board_settings_exist() -> bool {
    place_relation(c"board_settings").is_some()
}

/// Whether the history is the cooldowns (0.8.5 and later: [`crate::cooldowns`]): the claims
/// know the times the history does not show. (`place.cooldown_versions` is a view then.)
pub fn cooldowns_from_history() -> bool {
    place_relation(c"cooldown_claims").is_some_and(|claims| {
        // SAFETY: a catalog cache lookup by name, valid in any transaction.
        unsafe {
            pg_sys::get_attnum(claims, c"known_seq".as_ptr()) != pg_sys::InvalidAttrNumber as i16
        }
    })
}

/// Whether boards keep their colours' names (0.8.10 and later: [`crate::palette_names`]).
pub fn palette_names_exist() -> bool {
    place_relation(c"board_settings").is_some_and(|settings| {
        // SAFETY: a catalog cache lookup by name, valid in any transaction.
        unsafe {
            pg_sys::get_attnum(settings, c"palette_names".as_ptr())
                != pg_sys::InvalidAttrNumber as i16
        }
    })
}
