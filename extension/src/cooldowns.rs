//! Cooldowns: each user's last placement on each board. A call claims its users' rows
//! (locks them until commit): a second call for the same user waits for the first and then
//! sees its placement, so one cooldown window places one tile however many attempts race.
//!
//! Since 0.8.5 a placement writes nothing here: a user's last placement is the newest of
//! the user's placements in the history (`placements_user_idx`), read after the claim in
//! a statement of its own, which in READ COMMITTED sees what the claim's previous holder
//! committed. Under REPEATABLE READ the snapshot may miss that placement; the call then
//! meets its seq, taken already, and fails with 40001 ([`crate::writing`]): every
//! placement a snapshot misses has a seq after the newest one it sees. The claim row holds
//! what the history does not show (`known_at` as of `known_seq`: a time set by hand, a last
//! placement compacted away); the user's placements after `known_seq` supersede it.
//!
//! From 0.6.0 to 0.8.4 the times are versions in `place.cooldown_versions`: a placement
//! inserts the next one and deletes the one it replaces (a snapshot held elsewhere leaves
//! nothing for the user's next claim to walk, as with chunks: [`crate::chunks`]). Before
//! 0.6.0 the claim is a conditional upsert of the `place.cooldowns` row. The library still
//! does both for those schemas until ALTER EXTENSION UPDATE.

use crate::input::fail;
use crate::snapshots::for_isolation;
use crate::spi::{column, run, run_by_index, Statement};
use crate::stamps::timestamp;
use crate::storage::Board;
use pgrx::prelude::*;
use pgrx::spi::SpiClient;
use pgrx::{pg_sys, PgSqlErrorCode};
use std::collections::{HashMap, HashSet};

/// What a call's claim found: whose cooldown has passed (their rows are locked until
/// commit), when the others last placed, and where the claimed users' times are.
#[derive(Default)]
pub struct Claims {
    /// Users whose cooldown on the board has passed.
    pub claimed: HashSet<i64>,
    /// When each refused user last placed.
    pub last_of_refused: HashMap<i64, pg_sys::TimestampTz>,
    /// 0.6.0: each claimed user's newest version (None: none yet).
    held: Vec<(i64, Option<Newest>)>,
}

/// A user's newest cooldown version, as read under the claim.
struct Newest {
    version: i64,
    ctid: String,
    last_placed_at: pg_sys::TimestampTz,
}

/// Claims `users` (sorted, distinct) on `board` at `now`: the ones whose cooldown has
/// passed (all of them without a cooldown) are claimed.
pub fn claim(
    client: &mut SpiClient<'_>,
    board: &Board,
    users: &[i64],
    now: pg_sys::TimestampTz,
) -> Claims {
    if users.is_empty() {
        return Claims::default();
    }
    if board.cooldowns_from_history {
        claim_from_history(client, board, users, now)
    } else if board.versions {
        claim_versions(client, board, users, now)
    } else {
        claim_in_place(client, board, users, now)
    }
}

/// Records that the claimed users place now: their cooldown runs from `now`. Done before
/// the call takes its board's seq lock, so that the lock is held no longer for it.
pub fn record(
    client: &mut SpiClient<'_>,
    board: &Board,
    claims: &Claims,
    now: pg_sys::TimestampTz,
) {
    // Before 0.6.0 the claim wrote `now` already; since 0.8.5 the history is the record.
    if !board.versions || board.cooldowns_from_history || claims.held.is_empty() {
        return;
    }
    let wanted = claims.held.len();
    let mut users = Vec::with_capacity(wanted);
    let mut ctids = Vec::with_capacity(wanted);
    let mut versions = Vec::with_capacity(wanted);
    let mut lasts = Vec::with_capacity(wanted);
    for (user, newest) in &claims.held {
        users.push(*user);
        ctids.push(newest.as_ref().map(|n| n.ctid.clone()));
        versions.push(newest.as_ref().map_or(0, |n| n.version));
        lasts.push(newest.as_ref().map(|n| timestamp(n.last_placed_at)));
    }
    let args = [
        board.id.into(),
        users.into(),
        ctids.into(),
        versions.into(),
        timestamp(now).into(),
        lasts.into(),
    ];
    let statement = for_isolation(&WRITE_VERSIONS, &WRITE_VERSIONS_REPEATABLE);
    if run_by_index(client, statement, &args).len() != wanted {
        fail(
            PgSqlErrorCode::ERRCODE_T_R_SERIALIZATION_FAILURE,
            format!(
                "a cooldown on board {} changed during the call; try again",
                board.id
            ),
        );
    }
}

/// Moves the claimed users' last placement to `stamp`, the time their placements were
/// stamped with when it is later than `now` (a placement that took its seq first was
/// stamped later): the cooldown runs from the stamp the history shows.
pub fn restamp(
    client: &mut SpiClient<'_>,
    board: &Board,
    claims: &Claims,
    stamp: pg_sys::TimestampTz,
) {
    // Since 0.8.5 the history shows the stamp.
    if claims.claimed.is_empty() || board.cooldowns_from_history {
        return;
    }
    if !board.versions {
        let mut users: Vec<i64> = claims.claimed.iter().copied().collect();
        users.sort_unstable();
        let args = [board.id.into(), users.into(), timestamp(stamp).into()];
        run(client, &RESTAMP, &args);
        return;
    }
    // The versions record() inserted in this transaction: no other snapshot can see them,
    // so updating them in place leaves nothing for others to walk past.
    let (users, versions): (Vec<i64>, Vec<i64>) = claims
        .held
        .iter()
        .map(|(user, newest)| (*user, newest.as_ref().map_or(0, |n| n.version) + 1))
        .unzip();
    let args = [
        board.id.into(),
        users.into(),
        versions.into(),
        timestamp(stamp).into(),
    ];
    run_by_index(client, &RESTAMP_VERSIONS, &args);
}

static RESTAMP_VERSIONS: Statement = Statement {
    sql: "UPDATE place.cooldown_versions v SET last_placed_at = greatest(v.last_placed_at, $4) \
          FROM unnest($2::bigint[], $3::bigint[]) AS t(u, n) \
          WHERE v.board_id = $1 AND v.user_id = t.u AND v.version = t.n",
    params: &[
        pg_sys::INT8OID,
        pg_sys::INT8ARRAYOID,
        pg_sys::INT8ARRAYOID,
        pg_sys::TIMESTAMPTZOID,
    ],
};

static LOCK_CLAIMS: Statement = Statement {
    // Users in id order, so two calls claiming overlapping users never wait in a circle. A
    // new user's row is inserted; an existing one is locked (ON CONFLICT locks the rows it
    // meets even where WHERE leaves them unchanged) and never written.
    sql: "INSERT INTO place.cooldown_claims AS c (board_id, user_id) \
          SELECT $1, u FROM unnest($2::bigint[]) AS u ORDER BY u \
          ON CONFLICT (board_id, user_id) DO UPDATE SET board_id = c.board_id WHERE false",
    params: &[pg_sys::INT8OID, pg_sys::INT8ARRAYOID],
};

static READ_NEWEST: Statement = Statement {
    // After the claim, in a statement of its own: it sees what the previous holder of a
    // user's row committed. (Under REPEATABLE READ the snapshot may miss it: deleting the
    // version it replaced then fails with 40001 in record().)
    sql: "SELECT u, v.version, v.ctid::text, v.last_placed_at FROM unnest($2::bigint[]) AS u \
          LEFT JOIN LATERAL (SELECT version, ctid, last_placed_at FROM place.cooldown_versions \
                             WHERE board_id = $1 AND user_id = u ORDER BY version DESC LIMIT 1) v ON true",
    params: &[pg_sys::INT8OID, pg_sys::INT8ARRAYOID],
};

// The claim holds the users' rows, so in READ COMMITTED each next version number is free;
// under REPEATABLE READ it may be taken by a version the snapshot misses, and ON CONFLICT
// then fails with 40001 (a plain INSERT would say 23505). Only then, as with chunks
// (crate::chunks): the speculative insertion costs each version a probe and a WAL record.
macro_rules! write_versions {
    ($conflict:literal) => {
        Statement {
            sql: concat!(
                "WITH replaced AS (DELETE FROM place.cooldown_versions \
                                   WHERE ctid = ANY ($3::text[]::tid[])) \
                 INSERT INTO place.cooldown_versions AS v (board_id, user_id, version, last_placed_at) \
                 SELECT $1, t.u, t.n + 1, greatest(t.last, $5) \
                 FROM unnest($2::bigint[], $4::bigint[], $6::timestamptz[]) AS t(u, n, last)",
                $conflict,
                " RETURNING v.user_id"
            ),
            params: &[
                pg_sys::INT8OID,
                pg_sys::INT8ARRAYOID,
                pg_sys::TEXTARRAYOID,
                pg_sys::INT8ARRAYOID,
                pg_sys::TIMESTAMPTZOID,
                pg_sys::TIMESTAMPTZARRAYOID,
            ],
        }
    };
}

static WRITE_VERSIONS: Statement = write_versions!("");
static WRITE_VERSIONS_REPEATABLE: Statement =
    write_versions!(" ON CONFLICT (board_id, user_id, version) DO NOTHING");

fn claim_versions(
    client: &mut SpiClient<'_>,
    board: &Board,
    users: &[i64],
    now: pg_sys::TimestampTz,
) -> Claims {
    let mut claims = Claims::default();
    lock_claims(client, board, &LOCK_CLAIMS, users);
    let rows = run_by_index(
        client,
        &READ_NEWEST,
        &[board.id.into(), users.to_vec().into()],
    );
    for row in rows {
        let user = column::<i64>(&row, 1);
        let newest = row.get::<i64>(2).ok().flatten().map(|version| Newest {
            version,
            ctid: column::<String>(&row, 3),
            last_placed_at: column::<TimestampWithTimeZone>(&row, 4).into(),
        });
        match newest {
            Some(n) if board.cooldown_us > 0 && n.last_placed_at > now - board.cooldown_us => {
                claims.last_of_refused.insert(user, n.last_placed_at);
            }
            newest => {
                claims.claimed.insert(user);
                claims.held.push((user, newest));
            }
        }
    }
    claims
}

static LOCK_KNOWN_CLAIMS: Statement = Statement {
    // As LOCK_CLAIMS. A new row (a user who never placed here, or whose cooldown was lifted
    // by hand) starts at the board's newest seq: the user's older placements do not count.
    sql: "INSERT INTO place.cooldown_claims AS c (board_id, user_id, known_seq) \
          SELECT $1, u, (SELECT coalesce(max(seq), 0) FROM place.placements WHERE board_id = $1) \
          FROM unnest($2::bigint[]) AS u ORDER BY u \
          ON CONFLICT (board_id, user_id) DO UPDATE SET board_id = c.board_id WHERE false",
    params: &[pg_sys::INT8OID, pg_sys::INT8ARRAYOID],
};

static READ_LAST_PLACED: Statement = Statement {
    // After the claim, in a statement of its own (see the module's comment).
    sql: "SELECT u, coalesce(p.placed_at, c.known_at) FROM unnest($2::bigint[]) AS u \
          JOIN place.cooldown_claims c ON c.board_id = $1 AND c.user_id = u \
          LEFT JOIN LATERAL (SELECT placed_at FROM place.placements \
                             WHERE board_id = $1 AND user_id = u AND seq > c.known_seq \
                             ORDER BY seq DESC LIMIT 1) p ON true",
    params: &[pg_sys::INT8OID, pg_sys::INT8ARRAYOID],
};

/// Since 0.8.5: the claim, then each claimed user's last placement from the history.
fn claim_from_history(
    client: &mut SpiClient<'_>,
    board: &Board,
    users: &[i64],
    now: pg_sys::TimestampTz,
) -> Claims {
    let mut claims = Claims::default();
    lock_claims(client, board, &LOCK_KNOWN_CLAIMS, users);
    // Without a cooldown every claimed user places, whenever they last did: the history
    // need not be asked (a sixth of a gateway group's time on a checkbox board). The claim
    // rows are still taken, so a cooldown set later runs from these placements.
    if board.cooldown_us == 0 {
        claims.claimed = users.iter().copied().collect();
        return claims;
    }
    let rows = run(
        client,
        &READ_LAST_PLACED,
        &[board.id.into(), users.to_vec().into()],
    );
    for row in rows {
        let user = column::<i64>(&row, 1);
        let last = row
            .get::<TimestampWithTimeZone>(2)
            .ok()
            .flatten()
            .map(pg_sys::TimestampTz::from);
        match last {
            Some(at) if board.cooldown_us > 0 && at > now - board.cooldown_us => {
                claims.last_of_refused.insert(user, at);
            }
            _ => {
                claims.claimed.insert(user);
            }
        }
    }
    claims
}

/// Locks (inserting where missing) the users' claim rows with `statement`.
fn lock_claims(
    client: &mut SpiClient<'_>,
    board: &Board,
    statement: &'static Statement,
    users: &[i64],
) {
    // A new claim row's foreign key fails when its board or (the users are read, not
    // locked: crate::placing) its user was deleted while the call waited for it.
    crate::deleted_meanwhile::inserting(client, board.id, users, |client| {
        run(client, statement, &[board.id.into(), users.to_vec().into()]);
    });
}

/// Since 0.8.5, before `place.compact_history` drops the placements up to `seq`: each
/// user whose last placement is among them keeps its time as the claim's `known_at`.
pub fn keep_compacted(client: &mut SpiClient<'_>, board: &Board, seq: i64) {
    if board.cooldowns_from_history {
        run(client, &KEEP_COMPACTED, &[board.id.into(), seq.into()]);
    }
}

static KEEP_COMPACTED: Statement = Statement {
    sql: "UPDATE place.cooldown_claims c SET known_seq = $2, known_at = n.placed_at \
          FROM (SELECT k.user_id, p.placed_at FROM place.cooldown_claims k \
                CROSS JOIN LATERAL (SELECT seq, placed_at FROM place.placements \
                                    WHERE board_id = k.board_id AND user_id = k.user_id \
                                      AND seq > k.known_seq \
                                    ORDER BY seq DESC LIMIT 1) p \
                WHERE k.board_id = $1 AND p.seq <= $2) n \
          WHERE c.board_id = $1 AND c.user_id = n.user_id",
    params: &[pg_sys::INT8OID, pg_sys::INT8OID],
};

static CLAIM: Statement = Statement {
    // Before 0.6.0. Users in id order, as above.
    sql: "INSERT INTO place.cooldowns AS c (board_id, user_id, last_placed_at) \
          SELECT $1, u, $3 FROM unnest($2::bigint[]) AS u ORDER BY u \
          ON CONFLICT (board_id, user_id) DO UPDATE \
          SET last_placed_at = greatest(c.last_placed_at, excluded.last_placed_at) \
          WHERE $5 OR c.last_placed_at <= $4 \
          RETURNING user_id",
    params: &[
        pg_sys::INT8OID,
        pg_sys::INT8ARRAYOID,
        pg_sys::TIMESTAMPTZOID,
        pg_sys::TIMESTAMPTZOID,
        pg_sys::BOOLOID,
    ],
};

/// Before 0.6.0: claimed users' last placement becomes `now` as they are claimed.
fn claim_in_place(
    client: &mut SpiClient<'_>,
    board: &Board,
    users: &[i64],
    now: pg_sys::TimestampTz,
) -> Claims {
    let args = [
        board.id.into(),
        users.to_vec().into(),
        timestamp(now).into(),
        timestamp(now - board.cooldown_us).into(),
        (board.cooldown_us == 0).into(),
    ];
    let claimed: HashSet<i64> = run(client, &CLAIM, &args)
        .map(|row| column::<i64>(&row, 1))
        .collect();
    let refused: Vec<i64> = users
        .iter()
        .copied()
        .filter(|u| !claimed.contains(u))
        .collect();
    let last_of_refused = if refused.is_empty() {
        HashMap::new()
    } else {
        run(client, &LAST_PLACEMENTS, &[board.id.into(), refused.into()])
            .map(|row| {
                let user = column::<i64>(&row, 1);
                let at = column::<TimestampWithTimeZone>(&row, 2);
                (user, pg_sys::TimestampTz::from(at))
            })
            .collect()
    };
    Claims {
        claimed,
        last_of_refused,
        held: Vec::new(),
    }
}

static RESTAMP: Statement = Statement {
    // Before 0.6.0.
    sql: "UPDATE place.cooldowns SET last_placed_at = greatest(last_placed_at, $3) \
          WHERE board_id = $1 AND user_id = ANY($2)",
    params: &[
        pg_sys::INT8OID,
        pg_sys::INT8ARRAYOID,
        pg_sys::TIMESTAMPTZOID,
    ],
};

static LAST_PLACEMENTS: Statement = Statement {
    // Before 0.6.0: read after CLAIM waited for the rows.
    sql: "SELECT user_id, last_placed_at FROM place.cooldowns WHERE board_id = $1 AND user_id = ANY($2)",
    params: &[pg_sys::INT8OID, pg_sys::INT8ARRAYOID],
};
