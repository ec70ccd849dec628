//! Idempotency keys: a client that lost the answer to a placement retries it with the
//! same key, and gets the first placement's answer instead of a second placement (or a
//! cooldown refusal for a tile that was placed).
//!
//! A key is the caller's name for one placement of one user on one board, kept for
//! [`KEY_WINDOW_US`] in `place.placement_keys`. A call inserts its keys before it places
//! (`ON CONFLICT DO UPDATE`, which takes over an expired row only): a concurrent call with
//! the same key waits on the unique index until the first one commits, and then finds its
//! row, so one key places at most once however many retries race. A key whose placement
//! was refused (cooldown, frozen tile) is removed again, so its retry is a new attempt. A
//! key older than the window is taken as new; expired rows are removed a few at a time by
//! the calls that add keys.

use crate::input::invalid;
use crate::item::Item;
use crate::spi::{column, run, Statement};
use crate::stamps::timestamp;
use crate::storage::Board;
use pgrx::prelude::*;
use pgrx::spi::SpiClient;
use std::collections::HashMap;

/// How long a key answers its retries: a day.
pub const KEY_WINDOW_US: i64 = 24 * 3600 * 1_000_000;
/// The longest key, in bytes.
pub const MAX_KEY_BYTES: usize = 200;
/// Expired keys removed by a call, beyond one for each key it adds.
const PRUNE_EXTRA: i64 = 64;

/// What the earlier placement under a key was: its seq and when its user could place again.
#[derive(Clone, Copy)]
pub struct Earlier {
    pub seq: i64,
    pub next_allowed_at: pg_sys::TimestampTz,
}

/// How a call's items stand with their keys.
pub enum Keyed {
    /// No key, or a key this call is the first to use: placed as usual.
    New,
    /// A retry: answered with the earlier placement, not placed.
    Earlier(Earlier),
    /// The same key earlier in this call: answered as that item is.
    SameAs(usize),
}

static CLAIM: Statement = Statement {
    sql: "INSERT INTO place.placement_keys AS k (board_id, user_id, key, x, y, color, made_at) \
          SELECT $1, u, key, x, y, c, $7 \
          FROM unnest($2::bigint[], $3::text[], $4::int[], $5::int[], $6::int[]) AS t(u, key, x, y, c) \
          ON CONFLICT (board_id, user_id, key) DO UPDATE \
              SET x = excluded.x, y = excluded.y, color = excluded.color, \
                  made_at = excluded.made_at, seq = NULL, next_allowed_at = NULL \
              WHERE k.made_at < $8 \
          RETURNING user_id, key",
    params: &[
        pg_sys::INT8OID,
        pg_sys::INT8ARRAYOID,
        pg_sys::TEXTARRAYOID,
        pg_sys::INT4ARRAYOID,
        pg_sys::INT4ARRAYOID,
        pg_sys::INT4ARRAYOID,
        pg_sys::TIMESTAMPTZOID,
        pg_sys::TIMESTAMPTZOID,
    ],
};

static EARLIER: Statement = Statement {
    sql: "SELECT k.user_id, k.key, k.x, k.y, k.color, k.seq, k.next_allowed_at \
          FROM unnest($2::bigint[], $3::text[]) AS t(u, key) \
          JOIN place.placement_keys k ON k.board_id = $1 AND k.user_id = t.u AND k.key = t.key",
    params: &[pg_sys::INT8OID, pg_sys::INT8ARRAYOID, pg_sys::TEXTARRAYOID],
};

static PLACED: Statement = Statement {
    sql: "UPDATE place.placement_keys k SET seq = t.seq, next_allowed_at = $5 \
          FROM unnest($2::bigint[], $3::text[], $4::bigint[]) AS t(u, key, seq) \
          WHERE k.board_id = $1 AND k.user_id = t.u AND k.key = t.key",
    params: &[
        pg_sys::INT8OID,
        pg_sys::INT8ARRAYOID,
        pg_sys::TEXTARRAYOID,
        pg_sys::INT8ARRAYOID,
        pg_sys::TIMESTAMPTZOID,
    ],
};

static REFUSED: Statement = Statement {
    sql: "DELETE FROM place.placement_keys k \
          USING unnest($2::bigint[], $3::text[]) AS t(u, key) \
          WHERE k.board_id = $1 AND k.user_id = t.u AND k.key = t.key",
    params: &[pg_sys::INT8OID, pg_sys::INT8ARRAYOID, pg_sys::TEXTARRAYOID],
};

// SKIP LOCKED: two calls pruning at once take different rows instead of waiting.
static PRUNE: Statement = Statement {
    sql: "DELETE FROM place.placement_keys k \
          USING (SELECT board_id, user_id, key FROM place.placement_keys \
                 WHERE made_at < $1 ORDER BY made_at LIMIT $2 FOR UPDATE SKIP LOCKED) old \
          WHERE (k.board_id, k.user_id, k.key) = (old.board_id, old.user_id, old.key)",
    params: &[pg_sys::TIMESTAMPTZOID, pg_sys::INT8OID],
};

/// Checks each key (`label(i)` names item i's in errors): at most [`MAX_KEY_BYTES`]
/// bytes, not empty.
pub fn check_keys(keys: &[Option<String>], label: impl Fn(usize) -> String) {
    for (i, key) in keys.iter().enumerate() {
        if let Some(key) = key {
            if key.is_empty() || key.len() > MAX_KEY_BYTES {
                invalid(format!(
                    "{} must be 1 to {MAX_KEY_BYTES} bytes long (it is {})",
                    label(i),
                    key.len()
                ));
            }
        }
    }
}

/// Takes the call's keys: each keyed item is new (its key is now this call's until
/// commit), a retry of an earlier placement, or a repeat of an earlier item of the call.
/// A key used before for another tile or colour is refused (22023), naming `label(i)`.
pub fn claim(
    client: &mut SpiClient<'_>,
    board: &Board,
    items: &[Item],
    keys: &[Option<String>],
    now: pg_sys::TimestampTz,
    label: impl Fn(usize) -> String,
) -> Vec<Keyed> {
    let mut keyed: Vec<Keyed> = items.iter().map(|_| Keyed::New).collect();
    let mut first: HashMap<(i64, &str), usize> = HashMap::new();
    let (mut users, mut names, mut xs, mut ys, mut colors) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (i, (item, key)) in items.iter().zip(keys).enumerate() {
        let Some(key) = key.as_deref() else { continue };
        if let Some(&j) = first.get(&(item.user, key)) {
            same_tile(&items[j], item, key, &label(i));
            keyed[i] = Keyed::SameAs(j);
            continue;
        }
        first.insert((item.user, key), i);
        users.push(item.user);
        names.push(key.to_string());
        xs.push(item.x);
        ys.push(item.y);
        colors.push(item.color);
    }
    if users.is_empty() {
        return keyed;
    }
    let cutoff = now.saturating_sub(KEY_WINDOW_US);
    let added = users.len() as i64;
    let mut ours: std::collections::HashSet<(i64, String)> = std::collections::HashSet::new();
    let args = [
        board.id.into(),
        users.clone().into(),
        names.clone().into(),
        xs.into(),
        ys.into(),
        colors.into(),
        timestamp(now).into(),
        timestamp(cutoff).into(),
    ];
    // A key's user may have been deleted since the call read it (crate::deleted_meanwhile).
    let claimed = crate::deleted_meanwhile::inserting(client, board.id, &users, |client| {
        run(client, &CLAIM, &args)
            .map(|row| (column::<i64>(&row, 1), column::<String>(&row, 2)))
            .collect::<Vec<_>>()
    });
    ours.extend(claimed);
    if ours.len() < users.len() {
        let args = [board.id.into(), users.into(), names.into()];
        for row in run(client, &EARLIER, &args) {
            let (user, key) = (column::<i64>(&row, 1), column::<String>(&row, 2));
            if ours.contains(&(user, key.clone())) {
                continue;
            }
            let i = first[&(user, key.as_str())];
            let stored = Item {
                user,
                x: column(&row, 3),
                y: column(&row, 4),
                color: column(&row, 5),
            };
            same_tile(&stored, &items[i], &key, &label(i));
            let seq: Option<i64> = row.get(6).ok().flatten();
            let next: Option<TimestampWithTimeZone> = row.get(7).ok().flatten();
            let (Some(seq), Some(next)) = (seq, next) else {
                // Committed rows always carry their placement: settle() fills or removes
                // a claimed row before its call commits.
                panic!("placement key {key:?} of user {user} has no placement");
            };
            keyed[i] = Keyed::Earlier(Earlier {
                seq,
                next_allowed_at: next.into_inner(),
            });
        }
    }
    let args = [timestamp(cutoff).into(), (added + PRUNE_EXTRA).into()];
    run(client, &PRUNE, &args);
    keyed
}

/// After the call placed: the keys of the items it placed hold their seqs, the keys of
/// the items it refused are let go. `placed[i]`: item i's seq, when it was placed by this
/// call.
pub fn settle(
    client: &mut SpiClient<'_>,
    board: &Board,
    items: &[Item],
    keys: &[Option<String>],
    keyed: &[Keyed],
    placed: &[Option<i64>],
    next_allowed_at: pg_sys::TimestampTz,
) {
    let (mut placed_users, mut placed_keys, mut seqs) = (Vec::new(), Vec::new(), Vec::new());
    let (mut refused_users, mut refused_keys) = (Vec::new(), Vec::new());
    for (i, key) in keys.iter().enumerate() {
        let (Some(key), Keyed::New) = (key, &keyed[i]) else {
            continue;
        };
        match placed[i] {
            Some(seq) => {
                placed_users.push(items[i].user);
                placed_keys.push(key.clone());
                seqs.push(seq);
            }
            None => {
                refused_users.push(items[i].user);
                refused_keys.push(key.clone());
            }
        }
    }
    if !seqs.is_empty() {
        let args = [
            board.id.into(),
            placed_users.into(),
            placed_keys.into(),
            seqs.into(),
            timestamp(next_allowed_at).into(),
        ];
        run(client, &PLACED, &args);
    }
    if !refused_users.is_empty() {
        let args = [board.id.into(), refused_users.into(), refused_keys.into()];
        run(client, &REFUSED, &args);
    }
}

/// A key names one placement: its retry must be the same tile and colour.
fn same_tile(earlier: &Item, retry: &Item, key: &str, label: &str) {
    if (earlier.x, earlier.y, earlier.color) != (retry.x, retry.y, retry.color) {
        invalid(format!(
            "{label} {key:?} of user {} was used for another placement ({}, {}) colour {} \
             (a retry must repeat it; a new placement needs a new key)",
            retry.user, earlier.x, earlier.y, earlier.color
        ));
    }
}
