//! pgplace: a collaborative board inside PostgreSQL (`CREATE EXTENSION pgplace`, schema `place`).
//!
//! # Layout
//! - `../schema/schema.sql`: the tables (board settings, chunks and their versions, users,
//!   user_tokens, placements, cooldowns) and the view boards.
//! - `../schema/board_chunks.sql`: the view board_chunks (the board read whole, in chunks).
//! - `../schema/notify.sql`: the triggers that announce board changes on channel `pgplace`.
//! - `../schema/watch.sql`: watching any table (`watch`, `kick`), the change log and its
//!   commit-ordered positions.
//! - `../schema/views.sql`: named list views over watched tables (`create_view`, `view_rows`).
//! - `../schema/sessions.sql`: the gateway's sessions and their subscriptions.
//! - `../schema/placers.sql`: which gateway groups a board's placements (its lease).
//! - `../schema/functions.sql`: `COMMENT ON` every function; settings of the hot ones.
//!
//! The modules, each listed after every module it uses (a test holds this order against
//! their imports, `tests/tests/database/layout.rs`):
//! - [`input`]: NULL checks and the errors every function raises for bad arguments.
//! - [`require_standby`]: `pgplace.require_synchronous_standby`, no placement (nor any
//!   other write, at its commit) without a synchronous standby.
//! - [`durability`]: `await_durable`, the wait after an asynchronous commit or a read.
//! - [`early_release`]: `pgplace.release_before_flush`, the seq lock freed before the
//!   commit's flush.
//! - [`catalog`]: which relations of schema `place` exist: the schema's version.
//! - [`spi`]: statements planned once per backend.
//! - [`stamps`]: a moment of the write path as SQL gets it ('infinity' for never).
//! - [`item`]: one placement to write.
//! - [`deleted_meanwhile`]: a user or board deleted while a placement waited to write its
//!   rows (a foreign key's 23503) told as the 42704 it is.
//! - [`snapshots`]: REPEATABLE READ callers and placements their snapshot missed.
//! - [`fold_sql`]: the SQL of a board's newest fold, shared by `storage` and `folds`.
//! - [`expressions`]: checks that a view's filter is one SQL expression.
//! - [`acting_as`]: running work as another role under `SECURITY_RESTRICTED_OPERATION`.
//! - [`storage`]: a board's settings, its seq lock and seqs, its packed bits read whole.
//! - [`chunks`]: the packed bits in 512-byte chunks, each written as a new version.
//! - [`folds`]: the chunks as of a folded seq, the history after it applied by readers.
//! - [`newest`]: the packed board read from the chunks' newest versions, without SQL.
//! - [`bitfield`]: `bitfield_get` / `bitfield_set`, the packed layout for SQL users.
//! - [`palette_names`]: the names of a board's colours, kept through palette changes.
//! - [`boards`]: creating boards, their settings, reading the packed board and tiles.
//! - [`users`]: users and their tokens.
//! - [`notify`]: the payload builders the triggers call.
//! - [`capture`]: the trigger that stages a watched table's changes in `place.changes`.
//! - [`freezing`]: tiles that freeze after resting unchanged (`freeze_after`).
//! - [`cooldowns`]: each user's last placement per board, claimed atomically.
//! - [`placement_keys`]: idempotency keys, so a retried placement places once.
//! - [`timetravel`]: keyframes, the board at a seq or a time, compacting the history.
//! - [`writing`]: the write path (tiles, seq, history, keyframes) and the order in which
//!   every writer takes its locks.
//! - [`placing`]: `place` and `place_many`, the atomic place-with-cooldown (checks and
//!   outcomes; the writing is [`writing`]'s).
//! - [`moderation`]: bans; restoring a region and reverting a user as ordinary placements.
//! - [`history`]: tile and user history (paged by seq), the board as rows.
//! - [`render`]: the board as a PNG.
//! - [`past_tiles`]: tiles as they were at a time, as rows (`tile_at`, `tiles_at`).
//! - [`erasing`]: deleting a board, erasing a person (`delete_board`, `erase_user`).
//! - [`resize`]: growing and shrinking a board.
//! - [`owner_reads`]: every read of a user's table, as its owner, the table named by OID.
//! - [`callers`]: the entry points that authorize their caller (`watch`, `create_view`, ...).
//! - [`filters`]: checks a view's filter from its analysed tree, as the view's creator.
//!
//! The packed layout, palettes and payload format live in the `pgplace-core` crate, which
//! the gateway shares, so the two sides can never disagree about a bit or a payload.

use pgrx::prelude::*;

pub mod acting_as;
pub mod bitfield;
pub mod boards;
pub mod callers;
pub mod capture;
pub mod catalog;
pub mod chunks;
pub mod cooldowns;
pub mod deleted_meanwhile;
pub mod durability;
pub mod early_release;
pub mod erasing;
pub mod expressions;
pub mod filters;
pub mod fold_sql;
pub mod folds;
pub mod freezing;
pub mod history;
pub mod input;
pub mod item;
pub mod moderation;
pub mod newest;
pub mod notify;
pub mod owner_reads;
pub mod palette_names;
pub mod past_tiles;
pub mod placement_keys;
pub mod placing;
pub mod render;
pub mod require_standby;
pub mod resize;
pub mod snapshots;
pub mod spi;
pub mod stamps;
pub mod storage;
pub mod timetravel;
pub mod users;
pub mod writing;

::pgrx::pg_module_magic!(name, version);

#[pg_guard]
pub extern "C-unwind" fn _PG_init() {
    early_release::init();
    require_standby::init();
}

extension_sql_file!("../schema/schema.sql", name = "schema", bootstrap);
extension_sql_file!(
    "../schema/notify.sql",
    name = "notify",
    requires = [notify::placement_payloads, notify::board_payload]
);
extension_sql_file!(
    "../schema/board_chunks.sql",
    name = "board_chunks",
    requires = ["schema", newest::_newest_bits]
);
extension_sql_file!(
    "../schema/watch.sql",
    name = "watch",
    requires = ["schema", owner_reads::_read_as_owner]
);
extension_sql_file!(
    "../schema/views.sql",
    name = "views",
    requires = [
        "watch",
        expressions::_is_one_expression,
        filters::check_filter_as,
        owner_reads::_read_as_owner
    ]
);
extension_sql_file!(
    "../schema/sessions.sql",
    name = "sessions",
    requires = ["schema"]
);
extension_sql_file!(
    "../schema/placers.sql",
    name = "placers",
    requires = ["schema", "sessions"]
);
extension_sql_file!("../schema/functions.sql", name = "functions", finalize);
