//! SPI statements planned once per backend and kept, so the placing path does not re-plan
//! its handful of queries on every call (the work after the board lock is serialized).

use pgrx::datum::DatumWithOid;
use pgrx::datum::{FromDatum, IntoDatum};
use pgrx::pg_sys::{self, PgOid};
use pgrx::spi::{OwnedPreparedStatement, SpiClient, SpiCursor, SpiHeapTupleData, SpiTupleTable};
use std::cell::RefCell;
use std::collections::HashMap;

/// A statement and the types of its parameters. Statements are prepared as mutating, which
/// SPI runs read-write: each one takes a fresh snapshot, so a query issued after the board
/// lock sees what the previous lock holder committed.
pub struct Statement {
    pub sql: &'static str,
    pub params: &'static [pg_sys::Oid],
}

thread_local! {
    static PLANS: RefCell<HashMap<usize, &'static OwnedPreparedStatement>> = RefCell::new(HashMap::new());
}

fn plan(client: &SpiClient<'_>, statement: &'static Statement) -> &'static OwnedPreparedStatement {
    let key = statement as *const Statement as usize;
    if let Some(plan) = PLANS.with(|plans| plans.borrow().get(&key).copied()) {
        return plan;
    }
    let types: Vec<PgOid> = statement
        .params
        .iter()
        .map(|oid| PgOid::from_untagged(*oid))
        .collect();
    let prepared = client
        .prepare_mut(statement.sql, &types)
        .unwrap_or_else(|e| panic!("preparing {:?}: {e}", statement.sql))
        .keep();
    // Plans live as long as the backend; leaking them lets callers hold one while a
    // nested call (a trigger) consults the cache.
    let plan: &'static OwnedPreparedStatement = Box::leak(Box::new(prepared));
    PLANS.with(|plans| plans.borrow_mut().insert(key, plan));
    plan
}

pub fn run<'conn>(
    client: &mut SpiClient<'conn>,
    statement: &'static Statement,
    args: &[DatumWithOid<'_>],
) -> SpiTupleTable<'conn> {
    // `select`, not `update`: both run a mutating plan read-write, but `update` first asks
    // for a transaction id, and a reader has no use for one. Every call of a read function
    // would burn an id (wraparound vacuums come sooner) and write a commit record, and a
    // hot standby cannot give one at all. A statement that writes a row takes its id then.
    let plan = plan(client, statement);
    client
        .select(plan, None, args)
        .unwrap_or_else(|e| panic!("running {:?}: {e}", statement.sql))
}

/// A cursor over a kept statement, for results too long to hold at once.
pub fn open_cursor<'conn>(
    client: &mut SpiClient<'conn>,
    statement: &'static Statement,
    args: &[DatumWithOid<'_>],
) -> SpiCursor<'conn> {
    // Read-write without a transaction id, as in `run`.
    client.open_cursor(plan(client, statement), args)
}

/// Column `ordinal` (1-based) of a row whose query makes it non-NULL and of type `T`.
pub fn column<T: FromDatum + IntoDatum>(row: &SpiHeapTupleData<'_>, ordinal: usize) -> T {
    row.get::<T>(ordinal)
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("column {ordinal} is NULL or not of the expected type"))
}

/// Runs a statement that finds chunks' newest versions (`place.chunk_versions`), planned
/// and run with scans that do not follow an index disabled. The statistics count one live
/// version per chunk, so a plan that fetches every version of a chunk and sorts them looks
/// as cheap as reading the index backwards; but the deleted versions are still there until
/// vacuum (and while any snapshot holds them), and only the backward index scan stops at
/// the first visible one. The settings hold for this statement only, as a function's SET
/// clause does (a new GUC nest level; an error undoes it with the (sub)transaction).
pub fn run_by_index<'conn>(
    client: &mut SpiClient<'conn>,
    statement: &'static Statement,
    args: &[DatumWithOid<'_>],
) -> SpiTupleTable<'conn> {
    // SAFETY: the same calls fmgr makes for a function's SET clauses; the names and values
    // are valid settings, so set_config_option cannot fail.
    let nest = unsafe { pg_sys::NewGUCNestLevel() };
    for name in [c"enable_seqscan", c"enable_bitmapscan"] {
        unsafe {
            pg_sys::set_config_option(
                name.as_ptr(),
                c"off".as_ptr(),
                pg_sys::GucContext::PGC_USERSET,
                pg_sys::GucSource::PGC_S_SESSION,
                pg_sys::GucAction::GUC_ACTION_SAVE,
                true,
                0,
                false,
            );
        }
    }
    let result = run(client, statement, args);
    // SAFETY: closes the nest level opened above, restoring the settings.
    unsafe { pg_sys::AtEOXact_GUC(true, nest) };
    result
}
