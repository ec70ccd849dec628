//! Who called pgplace: the role a watch, a view or a kick is authorized for.
//!
//! A SECURITY DEFINER function cannot see who called it: `current_user` is the extension's
//! owner, and `session_user` is the login, which code running as someone else shares - an
//! index expression during ANALYZE or autovacuum, a table owner's hook inside another
//! role's read, a view or SECURITY DEFINER function of another role. Authorizing by the
//! login would let such code act with the login's rights. So the entry points that
//! authorize (`watch`, `unwatch`, `kick`, `create_view`, `drop_view`) are C functions that
//! run as their caller: each takes the role the calling code runs as (`GetUserId`), refuses to run
//! inside a security-restricted operation (no such code has a reason to watch or make a
//! view), and calls its body (`place._watch`, ..., SECURITY DEFINER, executable by the
//! extension's owner alone, so that nobody can name another caller) as the owner, with that
//! role as the body's first argument.

use crate::acting_as::{self, refuse_in_restricted_operation, Privileged};
use crate::owner_reads::RawJsonb;
use pgrx::datum::DatumWithOid;
use pgrx::pg_sys;
use pgrx::prelude::*;

/// Runs `body` (a statement calling the entry point's body with `$1` the caller) as the
/// extension's owner; `args` are `$2`...; its first column's value.
fn call_body<T: FromDatum + IntoDatum>(
    entry: &str,
    body: &str,
    args: Vec<DatumWithOid<'_>>,
) -> Option<T> {
    as_caller(entry, args, |all| {
        Spi::get_one_with_args::<T>(body, all).unwrap_or_else(|e| error!("place.{entry}: {e}"))
    })
}

/// Runs `body`, which returns nothing, as `call_body` does.
fn run_body(entry: &str, body: &str, args: Vec<DatumWithOid<'_>>) {
    as_caller(entry, args, |all| {
        Spi::run_with_args(body, all).unwrap_or_else(|e| error!("place.{entry}: {e}"))
    })
}

fn as_caller<'a, R>(
    entry: &str,
    args: Vec<DatumWithOid<'a>>,
    run: impl FnOnce(&[DatumWithOid<'a>]) -> R,
) -> R {
    let caller = acting_as::current_user();
    refuse_in_restricted_operation(&format!("place.{entry}"));
    let mut all = vec![DatumWithOid::from(caller)];
    all.extend(args);
    let privileged = Privileged::begin();
    let result = run(&all);
    privileged.end();
    result
}

/// Announces every committed change of table `tbl` (`place._watch`).
#[pg_extern(volatile, parallel_unsafe, sql = false)]
fn watch(tbl: Option<pg_sys::Oid>, columns: Option<Vec<Option<String>>>, all_rows: Option<bool>) {
    run_body(
        "watch",
        "SELECT place._watch($1::pg_catalog.regrole, $2::pg_catalog.regclass, $3, $4)",
        vec![tbl.into(), columns.into(), all_rows.into()],
    );
}

/// Stops announcing table `tbl` (`place._unwatch`).
#[pg_extern(volatile, parallel_unsafe, sql = false)]
fn unwatch(tbl: Option<pg_sys::Oid>) -> Option<bool> {
    call_body::<bool>(
        "unwatch",
        "SELECT place._unwatch($1::pg_catalog.regrole, $2::pg_catalog.regclass)",
        vec![tbl.into()],
    )
}

/// Announces one row of a watched table again (`place._kick`). The key is passed on as
/// PostgreSQL holds it (any jsonb number, `1e400` too).
#[pg_extern(volatile, parallel_unsafe, sql = false)]
fn kick(tbl: Option<pg_sys::Oid>, pk: Option<RawJsonb>) {
    run_body(
        "kick",
        "SELECT place._kick($1::pg_catalog.regrole, $2::pg_catalog.regclass, $3)",
        vec![tbl.into(), pk.into()],
    );
}

/// A named list view over a watched table (`place._create_view`).
#[pg_extern(volatile, parallel_unsafe, sql = false)]
#[allow(clippy::too_many_arguments)]
fn create_view(
    name: Option<String>,
    tbl: Option<pg_sys::Oid>,
    order_by: Option<String>,
    filter: Option<String>,
    descending: Option<bool>,
    max_limit: Option<i32>,
    signed_in: Option<bool>,
) {
    run_body(
        "create_view",
        "SELECT place._create_view($1::pg_catalog.regrole, $2, $3::pg_catalog.regclass, $4, $5, $6, $7, $8)",
        vec![
            name.into(),
            tbl.into(),
            order_by.into(),
            filter.into(),
            descending.into(),
            max_limit.into(),
            signed_in.into(),
        ],
    );
}

/// Drops a named list view (`place._drop_view`).
#[pg_extern(volatile, parallel_unsafe, sql = false)]
fn drop_view(name: Option<String>) -> Option<bool> {
    call_body::<bool>(
        "drop_view",
        "SELECT place._drop_view($1::pg_catalog.regrole, $2)",
        vec![name.into()],
    )
}
