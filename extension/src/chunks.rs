//! A board's packed bits in chunks of [`CHUNK_BYTES`] bytes: storing, locking, reading and
//! writing them.
//!
//! Since 0.6.0 a chunk is never updated in place. Its row in `place.chunks` is what writers
//! lock (a row lock writes no new version of the row), and its bits are versions in
//! `place.chunk_versions`: a write inserts version n + 1 and deletes version n. While some
//! transaction holds an old snapshot, the deleted versions cannot be pruned, but the newest
//! one is the first entry of the primary key read backwards, so no write or read walks
//! them. (Schemas before 0.6.0 keep one `place.board_chunks` row per chunk, updated in
//! place: the library still writes them that way until ALTER EXTENSION UPDATE.) Since
//! 0.8.4 placements write no chunk: folds do ([`crate::folds`]), with [`rewrite`].

use crate::input::{fail, required_elements};
use crate::item::Item;
use crate::snapshots::for_isolation;
use crate::spi::{column, run, run_by_index, Statement};
use crate::storage::{changed_size, Board};
use pgplace_core::bits::TileWidth;
use pgrx::prelude::*;
use pgrx::spi::SpiClient;
use pgrx::{pg_sys, PgSqlErrorCode};
use std::collections::BTreeMap;

/// Bytes per chunk: small enough that a placement's write (and its WAL) stays small, large
/// enough that reading a whole 1000x1000x4 board is under a thousand rows.
pub const CHUNK_BYTES: usize = 512;

/// The chunk of `board` holding tile (x, y), and the tile's number inside that chunk.
pub fn locate(board: &Board, x: i32, y: i32) -> (i32, i64) {
    let n = x as u64 + board.width as u64 * y as u64;
    let per_chunk = CHUNK_BYTES as u64 * board.tile.tiles_per_byte();
    ((n / per_chunk) as i32, (n % per_chunk) as i64)
}

/// Zeroed chunks for a packed board of `packed_len` bytes.
pub fn empty_chunks(packed_len: usize) -> Vec<Vec<u8>> {
    (0..packed_len)
        .step_by(CHUNK_BYTES)
        .map(|start| vec![0u8; CHUNK_BYTES.min(packed_len - start)])
        .collect()
}

static INSERT_CHUNK_ROWS: Statement = Statement {
    sql: "INSERT INTO place.chunks (board_id, chunk_no) SELECT $1, generate_series(0, $2 - 1)",
    params: &[pg_sys::INT8OID, pg_sys::INT4OID],
};

static INSERT_FIRST_VERSIONS: Statement = Statement {
    sql: "INSERT INTO place.chunk_versions (board_id, chunk_no, version, bits) \
          SELECT $1, (ord - 1)::int, 1, bits FROM unnest($2::bytea[]) WITH ORDINALITY AS c(bits, ord)",
    params: &[pg_sys::INT8OID, pg_sys::BYTEAARRAYOID],
};

/// Before 0.6.0.
static INSERT_CHUNKS_IN_PLACE: Statement = Statement {
    sql: "INSERT INTO place.board_chunks (board_id, chunk_no, bits) \
          SELECT $1, (ord - 1)::int, bits FROM unnest($2::bytea[]) WITH ORDINALITY AS c(bits, ord)",
    params: &[pg_sys::INT8OID, pg_sys::BYTEAARRAYOID],
};

fn store_chunks(client: &mut SpiClient<'_>, board_id: i64, chunks: Vec<Vec<u8>>) {
    if crate::catalog::chunk_versions_exist() {
        let count = chunks.len() as i32;
        run(client, &INSERT_CHUNK_ROWS, &[board_id.into(), count.into()]);
        run(
            client,
            &INSERT_FIRST_VERSIONS,
            &[board_id.into(), chunks.into()],
        );
    } else {
        run(
            client,
            &INSERT_CHUNKS_IN_PLACE,
            &[board_id.into(), chunks.into()],
        );
    }
}

/// Stores a packed board as its chunks.
pub fn insert_chunks(client: &mut SpiClient<'_>, board_id: i64, packed: &[u8]) {
    let chunks = packed.chunks(CHUNK_BYTES).map(<[u8]>::to_vec).collect();
    store_chunks(client, board_id, chunks);
}

pub fn insert_empty_chunks(client: &mut SpiClient<'_>, board_id: i64, packed_len: usize) {
    store_chunks(client, board_id, empty_chunks(packed_len));
}

static READ_CHUNKS: Statement = Statement {
    // The view shows the newest versions (a table before 0.6.0).
    sql: "SELECT chunk_no, bits FROM place.board_chunks WHERE board_id = $1 AND chunk_no = ANY($2)",
    params: &[pg_sys::INT8OID, pg_sys::INT4ARRAYOID],
};

pub fn read_chunks(
    client: &mut SpiClient<'_>,
    board_id: i64,
    chunk_nos: Vec<i32>,
) -> BTreeMap<i32, Vec<u8>> {
    run_by_index(client, &READ_CHUNKS, &[board_id.into(), chunk_nos.into()])
        .map(|row| (column::<i32>(&row, 1), column::<Vec<u8>>(&row, 2)))
        .collect()
}

static LOCK_CHUNK_ROWS: Statement = Statement {
    // NO KEY UPDATE: conflicts with other writers and with a resize's DELETE, not with the
    // foreign-key checks (KEY SHARE) of the versions this call inserts.
    sql: "SELECT chunk_no FROM place.chunks WHERE board_id = $1 AND chunk_no = ANY($2) \
          ORDER BY chunk_no FOR NO KEY UPDATE",
    params: &[pg_sys::INT8OID, pg_sys::INT4ARRAYOID],
};

/// The statement for this database's schema: chunk versions (0.6.0) or rows updated in
/// place (before).
fn for_schema(
    board: &Board,
    versioned: &'static Statement,
    in_place: &'static Statement,
) -> &'static Statement {
    if board.versions {
        versioned
    } else {
        in_place
    }
}

/// Locks the given chunks (sorted, distinct), in chunk order so that two calls never wait
/// for each other in a circle; 40001 when a resize replaced them meanwhile.
fn lock_chunks(client: &mut SpiClient<'_>, board: &Board, chunk_nos: Vec<i32>) {
    let wanted = chunk_nos.len();
    let statement = for_schema(board, &LOCK_CHUNK_ROWS, &LOCK_CHUNKS_IN_PLACE);
    if run_by_index(client, statement, &[board.id.into(), chunk_nos.into()]).len() != wanted {
        changed_size(board.id);
    }
}

/// Keeps `tiles` as they are until commit: locks the chunks holding them, as placements
/// do; since 0.8.4 (placements lock no chunk) the board's seq lock.
pub fn lock_tiles(client: &mut SpiClient<'_>, board: &Board, tiles: &[(i32, i32)]) {
    if board.folds {
        crate::storage::lock_seqs(client, board.id);
        return;
    }
    let mut chunks: Vec<i32> = tiles.iter().map(|(x, y)| locate(board, *x, *y).0).collect();
    chunks.sort_unstable();
    chunks.dedup();
    lock_chunks(client, board, chunks);
}

static LOCK_ALL_CHUNK_ROWS: Statement = Statement {
    sql: "SELECT chunk_no FROM place.chunks WHERE board_id = $1 ORDER BY chunk_no FOR UPDATE",
    params: &[pg_sys::INT8OID],
};

static LOCK_ALL_CHUNKS_IN_PLACE: Statement = Statement {
    sql: "SELECT chunk_no FROM place.board_chunks WHERE board_id = $1 ORDER BY chunk_no FOR UPDATE",
    params: &[pg_sys::INT8OID],
};

/// Locks every chunk of the board, in chunk order (a resize, before it replaces them).
pub fn lock_all_chunks(client: &mut SpiClient<'_>, board: &Board) {
    let statement = for_schema(board, &LOCK_ALL_CHUNK_ROWS, &LOCK_ALL_CHUNKS_IN_PLACE);
    run_by_index(client, statement, &[board.id.into()]);
}

static DELETE_CHUNK_ROWS: Statement = Statement {
    // Their versions go with them (ON DELETE CASCADE).
    sql: "DELETE FROM place.chunks WHERE board_id = $1",
    params: &[pg_sys::INT8OID],
};

static DELETE_CHUNKS_IN_PLACE: Statement = Statement {
    sql: "DELETE FROM place.board_chunks WHERE board_id = $1",
    params: &[pg_sys::INT8OID],
};

pub fn delete_chunks(client: &mut SpiClient<'_>, board: &Board) {
    let statement = for_schema(board, &DELETE_CHUNK_ROWS, &DELETE_CHUNKS_IN_PLACE);
    run_by_index(client, statement, &[board.id.into()]);
}

// Run after the chunks' rows are locked, in a statement of its own: its snapshot sees the
// version the previous writer committed, so in READ COMMITTED the next version number is
// free. The replaced versions are deleted by ctid alone, which leaves a TID scan as the
// only plan: with a condition on the key too, the plan may walk every version of the
// board, the dead ones included. Under REPEATABLE READ the transaction's snapshot may miss
// the newest version: inserting a version number that is taken then fails with 40001
// through ON CONFLICT (meeting a row the snapshot cannot see), where a plain INSERT would
// say 23505; deleting the one before fails with 40001 too (concurrent delete). Only then:
// ON CONFLICT's speculative insertion costs every version an index probe and a WAL record
// more.
macro_rules! replace_versions {
    ($new:literal, $conflict:literal) => {
        concat!(
            "WITH newest AS (SELECT n.chunk_no, v.version, v.bits, v.ctid FROM unnest($2::int[]) AS n(chunk_no), \
                  LATERAL (SELECT version, bits, ctid FROM place.chunk_versions \
                           WHERE board_id = $1 AND chunk_no = n.chunk_no ORDER BY version DESC LIMIT 1) v), \
             replaced AS (DELETE FROM place.chunk_versions \
                          WHERE ctid = ANY (ARRAY(SELECT ctid FROM newest))) \
             INSERT INTO place.chunk_versions AS v (board_id, chunk_no, version, bits) ",
            $new,
            $conflict,
            " RETURNING v.chunk_no"
        )
    };
}

macro_rules! apply_to_newest {
    ($conflict:literal) => {
        Statement {
            sql: replace_versions!(
                "SELECT $1, o.chunk_no, o.version + 1, place._apply_tiles(o.bits, $3, $4, $5) FROM newest o",
                $conflict
            ),
            params: &[
                pg_sys::INT8OID,
                pg_sys::INT4ARRAYOID,
                pg_sys::INT4OID,
                pg_sys::INT8ARRAYOID,
                pg_sys::INT4ARRAYOID,
            ],
        }
    };
}

/// One chunk, its tiles set in SQL: no round trip of the bits through the call.
static APPLY_TO_NEWEST: Statement = apply_to_newest!("");
static APPLY_TO_NEWEST_REPEATABLE: Statement =
    apply_to_newest!(" ON CONFLICT (board_id, chunk_no, version) DO NOTHING");

/// Chunks whose new bits the call computed from the versions it read: $2 the chunks, $3
/// where their versions are, $4 their numbers, $5 the new bits.
macro_rules! replace_read {
    ($conflict:literal) => {
        Statement {
            sql: concat!(
                "WITH replaced AS (DELETE FROM place.chunk_versions \
                                   WHERE ctid = ANY ($3::text[]::tid[])) \
                 INSERT INTO place.chunk_versions AS v (board_id, chunk_no, version, bits) \
                 SELECT $1, n.chunk_no, n.version + 1, n.bits \
                 FROM unnest($2::int[], $4::bigint[], $5::bytea[]) AS n(chunk_no, version, bits)",
                $conflict,
                " RETURNING v.chunk_no"
            ),
            params: &[
                pg_sys::INT8OID,
                pg_sys::INT4ARRAYOID,
                pg_sys::TEXTARRAYOID,
                pg_sys::INT8ARRAYOID,
                pg_sys::BYTEAARRAYOID,
            ],
        }
    };
}

static REPLACE_READ: Statement = replace_read!("");
static REPLACE_READ_REPEATABLE: Statement =
    replace_read!(" ON CONFLICT (board_id, chunk_no, version) DO NOTHING");

static READ_NEWEST: Statement = Statement {
    sql:
        "SELECT n.chunk_no, v.bits, v.version, v.ctid::text FROM unnest($2::int[]) AS n(chunk_no), \
          LATERAL (SELECT bits, version, ctid FROM place.chunk_versions \
                   WHERE board_id = $1 AND chunk_no = n.chunk_no ORDER BY version DESC LIMIT 1) v",
    params: &[pg_sys::INT8OID, pg_sys::INT4ARRAYOID],
};

/// Before 0.6.0: the lock also reads the bits, and where the row's current version is.
static LOCK_CHUNKS_IN_PLACE: Statement = Statement {
    sql: "SELECT chunk_no, bits, 0::bigint, ctid::text FROM place.board_chunks WHERE board_id = $1 AND chunk_no = ANY($2) \
          ORDER BY chunk_no FOR NO KEY UPDATE",
    params: &[pg_sys::INT8OID, pg_sys::INT4ARRAYOID],
};

/// Before 0.6.0: chunks this call has locked, rewritten where their current versions are
/// (a lookup by key would walk every version a snapshot held elsewhere keeps).
static REWRITE_IN_PLACE: Statement = Statement {
    sql: "UPDATE place.board_chunks AS c SET bits = v.bits \
          FROM unnest($2::text[]::tid[], $3::bytea[]) AS v(version, bits) \
          WHERE c.ctid = v.version AND c.board_id = $1",
    params: &[pg_sys::INT8OID, pg_sys::TEXTARRAYOID, pg_sys::BYTEAARRAYOID],
};

/// Before 0.6.0, one chunk: the UPDATE locks it itself.
static APPLY_IN_PLACE: Statement = Statement {
    sql: "UPDATE place.board_chunks SET bits = place._apply_tiles(bits, $3, $4, $5) \
          WHERE board_id = $1 AND chunk_no = ($2::int[])[1] RETURNING chunk_no",
    params: &[
        pg_sys::INT8OID,
        pg_sys::INT4ARRAYOID,
        pg_sys::INT4OID,
        pg_sys::INT8ARRAYOID,
        pg_sys::INT4ARRAYOID,
    ],
};

/// Sets the accepted tiles in their chunks, in order (a later tile wins): locks the
/// touched chunks in chunk order, then writes each of them once. With `colors_before`,
/// returns each item's tile colour from before the call (read under the lock: final).
pub fn write_tiles(
    client: &mut SpiClient<'_>,
    board: &Board,
    accepted: &[&Item],
    colors_before: bool,
) -> Option<Vec<u8>> {
    let (chunk_nos, ns): (Vec<i32>, Vec<i64>) = accepted
        .iter()
        .map(|item| locate(board, item.x, item.y))
        .unzip();
    let mut distinct = chunk_nos.clone();
    distinct.sort_unstable();
    distinct.dedup();
    let wanted = distinct.len();
    if wanted == 1 && !colors_before {
        // One chunk: its tiles are set where its bits are read, one statement fewer on the
        // path of place().
        if board.versions {
            lock_chunks(client, board, distinct.clone());
        }
        let statement = for_schema(
            board,
            for_isolation(&APPLY_TO_NEWEST, &APPLY_TO_NEWEST_REPEATABLE),
            &APPLY_IN_PLACE,
        );
        let colors: Vec<i32> = accepted.iter().map(|item| item.color).collect();
        let apply = [
            board.id.into(),
            distinct.into(),
            (board.tile.bits() as i32).into(),
            ns.into(),
            colors.into(),
        ];
        if run_by_index(client, statement, &apply).len() != 1 {
            if board.versions {
                changed_during_call(board.id);
            }
            changed_size(board.id);
        }
        return None;
    }
    let mut current = if board.versions {
        lock_chunks(client, board, distinct.clone());
        read_locked(client, &READ_NEWEST, board.id, distinct)
    } else {
        read_locked(client, &LOCK_CHUNKS_IN_PLACE, board.id, distinct)
    };
    if current.len() != wanted {
        changed_size(board.id);
    }
    let before: Option<Vec<u8>> = chunk_nos
        .iter()
        .zip(&ns)
        .map(|(chunk_no, n)| board.tile.get(&current[chunk_no].bits, *n).ok())
        .collect();
    if before.is_none() {
        changed_size(board.id);
    }
    // In array order: a later tile wins, as in _apply_tiles.
    for ((chunk_no, n), item) in chunk_nos.iter().zip(&ns).zip(accepted) {
        let chunk = current.get_mut(chunk_no).expect("every chunk was read");
        board
            .tile
            .set(&mut chunk.bits, *n, item.color.into())
            .expect("checked against the palette and inside the chunk");
    }
    replace(client, board, current);
    before
}

/// Writes each chunk's new bits where the version read was (a new version since 0.6.0,
/// in place before); 40001 if one of them changed meanwhile.
fn replace(client: &mut SpiClient<'_>, board: &Board, current: BTreeMap<i32, Current>) {
    let wanted = current.len();
    let mut chunk_nos = Vec::with_capacity(wanted);
    let mut rewritten = Vec::with_capacity(wanted);
    let mut ctids = Vec::with_capacity(wanted);
    let mut versions = Vec::with_capacity(wanted);
    for (chunk_no, chunk) in current {
        chunk_nos.push(chunk_no);
        rewritten.push(chunk.bits);
        ctids.push(chunk.ctid);
        versions.push(chunk.version);
    }
    let written = if board.versions {
        let args = [
            board.id.into(),
            chunk_nos.into(),
            ctids.into(),
            versions.into(),
            rewritten.into(),
        ];
        let statement = for_isolation(&REPLACE_READ, &REPLACE_READ_REPEATABLE);
        run_by_index(client, statement, &args).len()
    } else {
        let args = [board.id.into(), ctids.into(), rewritten.into()];
        run_by_index(client, &REWRITE_IN_PLACE, &args).len()
    };
    if written != wanted {
        changed_during_call(board.id);
    }
}

/// A fold ([`crate::folds::fold`]): sets each chunk's tiles (tile number in the chunk,
/// colour), in order, on its newest version, and writes each chunk once. The caller holds
/// the board's fold row: nothing else writes the chunks of a folded schema meanwhile.
pub fn rewrite(client: &mut SpiClient<'_>, board: &Board, touched: BTreeMap<i32, Vec<(i64, u8)>>) {
    let wanted = touched.len();
    let chunk_nos: Vec<i32> = touched.keys().copied().collect();
    let mut current = read_locked(client, &READ_NEWEST, board.id, chunk_nos);
    if current.len() != wanted {
        changed_size(board.id);
    }
    for (chunk_no, tiles) in touched {
        let chunk = current.get_mut(&chunk_no).expect("every chunk was read");
        for (n, color) in tiles {
            board
                .tile
                .set(&mut chunk.bits, n, color.into())
                .unwrap_or_else(|e| {
                    fail(
                        PgSqlErrorCode::ERRCODE_DATA_CORRUPTED,
                        format!("board {}: a placement is outside its chunks: {e}", board.id),
                    )
                });
        }
    }
    replace(client, board, current);
}

/// A chunk as a call read it under its lock.
struct Current {
    bits: Vec<u8>,
    /// Where the version read is, to replace it without looking it up again.
    ctid: String,
    /// Its number (0 before 0.6.0: chunks had no versions).
    version: i64,
}

/// Chunks this call has locked (or locks, before 0.6.0), by number: `statement` returns
/// chunk_no, bits, version, ctid.
fn read_locked(
    client: &mut SpiClient<'_>,
    statement: &'static Statement,
    board_id: i64,
    chunk_nos: Vec<i32>,
) -> BTreeMap<i32, Current> {
    run_by_index(client, statement, &[board_id.into(), chunk_nos.into()])
        .map(|row| {
            let chunk = Current {
                bits: column::<Vec<u8>>(&row, 2),
                version: column::<i64>(&row, 3),
                ctid: column::<String>(&row, 4),
            };
            (column::<i32>(&row, 1), chunk)
        })
        .collect()
}

/// A chunk's version was written by another transaction that this one's snapshot misses
/// (REPEATABLE READ; PostgreSQL usually says 40001 itself first), or a resize came between.
fn changed_during_call(board_id: i64) -> ! {
    fail(
        PgSqlErrorCode::ERRCODE_T_R_SERIALIZATION_FAILURE,
        format!("board {board_id} changed during the call; try again"),
    )
}

/// `bits` with tile `ns[i]` set to `colors[i]`, in order: the chunk half of a placement.
#[pg_extern(immutable, parallel_safe, strict, name = "_apply_tiles")]
pub fn apply_tiles(
    bits: &[u8],
    bits_per_tile: i32,
    ns: Vec<Option<i64>>,
    colors: Vec<Option<i32>>,
) -> Vec<u8> {
    // Elements as Options: a NULL element is a bad argument (22004), where pgrx's
    // conversion to Vec<i64> would fail with an internal error (XX000).
    let ns = required_elements("ns", Some(ns));
    let colors = required_elements("colors", Some(colors));
    let tile = TileWidth::new(bits_per_tile.into())
        .unwrap_or_else(|e| fail(PgSqlErrorCode::ERRCODE_DATA_CORRUPTED, e.to_string()));
    if ns.len() != colors.len() {
        fail(
            PgSqlErrorCode::ERRCODE_ARRAY_ELEMENT_ERROR,
            format!(
                "_apply_tiles takes as many colors ({}) as tiles ({})",
                colors.len(),
                ns.len()
            ),
        );
    }
    let mut out = bits.to_vec();
    for (n, color) in ns.into_iter().zip(colors) {
        tile.set(&mut out, n, color.into()).unwrap_or_else(|e| {
            fail(
                PgSqlErrorCode::ERRCODE_DATA_CORRUPTED,
                format!("a chunk is inconsistent with its board: {e}"),
            )
        });
    }
    out
}
