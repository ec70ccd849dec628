//! Reading a watched table with its owner's rights: every query pgplace runs over a user's
//! table goes through [`_read_as_owner`] (`view_rows`, `views_touched`, `kick`, and a new
//! view's first plan).
//!
//! PostgreSQL runs the table owner's code while it plans and runs such a query (partial
//! index predicates and index expressions are constant-folded when the planner loads them,
//! statistics expressions too; policies, rules and defaults are the owner's), so the query
//! runs as the owner, under `SECURITY_RESTRICTED_OPERATION` ([`crate::acting_as`]): that
//! code then runs with rights its author has already, and cannot escape them.
//!
//! The table is named by its OID, locked first: its name is looked up after the lock (which
//! a rename or a drop waits for) and pasted between the caller's `head` and `tail`, so a
//! name stored earlier can never be re-bound to another relation (a view over `pg_authid`
//! renamed into its place, say). It must still be an ordinary, permanent table.

use crate::acting_as::{self, refuse_in_restricted_operation, ActingAs};
use pgrx::callconv::{Arg, ArgAbi, BoxRet, FcInfo};
use pgrx::datum::Datum;
use pgrx::nullable::Nullable;
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::ffi::{CStr, CString};

/// The first column of the first row of `head <table> tail` (a query with one parameter,
/// `$1`, of type jsonb: `arg`), read as the table's owner; NULL when there is no row
/// (STRICT: NULL for a NULL argument).
/// Only pgplace's own functions call it (EXECUTE is not granted to anyone: it runs any
/// query as a table's owner), and they run as the extension's owner, which it checks.
#[pg_extern(volatile, parallel_unsafe)]
fn _read_as_owner(tbl: pg_sys::Oid, head: &str, tail: &str, arg: RawJsonb) -> Option<RawJsonb> {
    check_caller_is_extension_owner();
    refuse_in_restricted_operation("a read of a watched table");
    let table = WatchedTable::lock(tbl);
    // SAFETY: the table is locked, and an ordinary table (`lock` checked).
    unsafe { refuse_types_not_built_in(tbl, &table.name) };
    let sql = CString::new(format!("{head}{}{tail}", table.name))
        .unwrap_or_else(|_| error!("a query must not contain a NUL byte"));
    let acting = ActingAs::begin(table.owner);
    // SAFETY: plain SPI, connected and finished here; the result is copied out of SPI's
    // memory before SPI_finish frees it.
    let result = unsafe { first_value(&sql, arg) };
    acting.end();
    result
}

/// Locks table `tbl` by its OID for the rest of the transaction (a rename or a drop then
/// waits), checking that it is still a table pgplace may read: `watch` and `unwatch` take
/// it before they name the table in DDL.
#[pg_extern(volatile, parallel_unsafe)]
fn _lock_table(tbl: pg_sys::Oid) {
    check_caller_is_extension_owner();
    refuse_in_restricted_operation("watching or unwatching a table");
    WatchedTable::lock(tbl);
}

/// A table pgplace may read for its owner, locked (AccessShareLock, held to the end of the
/// transaction) before its name is looked up.
pub struct WatchedTable {
    pub owner: pg_sys::Oid,
    /// Schema-qualified and quoted.
    pub name: String,
}

impl WatchedTable {
    pub fn lock(tbl: pg_sys::Oid) -> WatchedTable {
        // SAFETY: locking an OID is valid whether or not a relation has it; the catalog row
        // is read after the lock, when no DDL can change it until the transaction ends.
        unsafe {
            pg_sys::LockRelationOid(tbl, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
            let tuple = pg_sys::SearchSysCache1(
                pg_sys::SysCacheIdentifier::RELOID as i32,
                pg_sys::Datum::from(tbl),
            );
            if tuple.is_null() {
                ereport!(
                    PgLogLevel::ERROR,
                    PgSqlErrorCode::ERRCODE_UNDEFINED_TABLE,
                    format!("relation with OID {} does not exist", u32::from(tbl)),
                    "It was dropped: drop the views over it and unwatch it."
                );
            }
            let class = pg_sys::heap_tuple_get_struct::<pg_sys::FormData_pg_class>(tuple);
            let owner = (*class).relowner;
            let kind = (*class).relkind as u8;
            let persistence = (*class).relpersistence as u8;
            let namespace = (*class).relnamespace;
            let relname = CStr::from_ptr((*class).relname.data.as_ptr()).to_owned();
            pg_sys::ReleaseSysCache(tuple);
            let schema = pg_sys::get_namespace_name(namespace);
            let name = CStr::from_ptr(pg_sys::quote_qualified_identifier(schema, relname.as_ptr()))
                .to_string_lossy()
                .into_owned();
            if kind != pg_sys::RELKIND_RELATION {
                ereport!(
                    PgLogLevel::ERROR,
                    PgSqlErrorCode::ERRCODE_WRONG_OBJECT_TYPE,
                    format!("{name} is not an ordinary table (only tables can be watched)")
                );
            }
            if persistence == pg_sys::RELPERSISTENCE_TEMP {
                ereport!(
                    PgLogLevel::ERROR,
                    PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
                    format!("{name} is a temporary table, which cannot be watched"),
                    "Watch a permanent table (an unlogged one will do)."
                );
            }
            WatchedTable { owner, name }
        }
    }
}

/// A column of a type a user made would run that user's code wherever pgplace turns rows
/// into JSON or compares them as the extension's owner: every read checks, from the
/// relation as it stands once locked (the catalogs as the transaction's snapshot shows them
/// may be older, under REPEATABLE READ, than the column).
///
/// # Safety
/// `tbl` is an ordinary table this transaction holds a lock on.
unsafe fn refuse_types_not_built_in(tbl: pg_sys::Oid, name: &str) {
    let relation = pg_sys::relation_open(tbl, pg_sys::NoLock as pg_sys::LOCKMODE);
    let desc = pgrx::PgTupleDesc::from_pg_unchecked((*relation).rd_att);
    let bad = desc
        .iter()
        .find(|a| !a.attisdropped && u32::from(a.atttypid) >= pg_sys::FirstNormalObjectId)
        .map(|a| {
            CStr::from_ptr(a.attname.data.as_ptr())
                .to_string_lossy()
                .into_owned()
        });
    pg_sys::relation_close(relation, pg_sys::NoLock as pg_sys::LOCKMODE);
    if let Some(column) = bad {
        ereport!(
            PgLogLevel::ERROR,
            PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
            format!(
                "table {name} has column {column} of a type that is not built into PostgreSQL"
            ),
            "pgplace reads watched rows with its owner's rights, so it never runs code a user wrote for a type. Use built-in types, or unwatch the table."
        );
    }
}

/// Only the extension's owner (the role pgplace's SECURITY DEFINER functions run as) may
/// use the functions that change identity, whatever was granted on them.
pub fn check_caller_is_extension_owner() {
    if acting_as::current_user() != acting_as::extension_owner() {
        ereport!(
            PgLogLevel::ERROR,
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            "only pgplace's own functions may call this function"
        );
    }
}

/// A read that is not what pgplace's callers make (one SELECT returning jsonb): 22023, as
/// for any argument out of its range.
fn bad_read(what: &str) -> ! {
    ereport!(
        PgLogLevel::ERROR,
        PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        format!("a read of a watched table {what}")
    );
    unreachable!()
}

/// Runs `sql` (one statement, `$1` jsonb) read-only in the current snapshot, and returns
/// its first row's first column, copied into the caller's memory context.
unsafe fn first_value(sql: &CStr, arg: RawJsonb) -> Option<RawJsonb> {
    let caller_context = pg_sys::CurrentMemoryContext;
    if pg_sys::SPI_connect() != pg_sys::SPI_OK_CONNECT as i32 {
        error!("SPI_connect failed");
    }
    let mut types = [pg_sys::JSONBOID];
    let plan = pg_sys::SPI_prepare(sql.as_ptr(), 1, types.as_mut_ptr());
    if plan.is_null() {
        bad_read("could not be prepared");
    }
    // One statement: the parts pasted around the table's name are pgplace's, but a
    // second statement must never ride along.
    if (*pg_sys::SPI_plan_get_plan_sources(plan)).length != 1 {
        bad_read("must be one statement");
    }
    let mut values = [arg.0];
    let nulls = [b' ' as std::ffi::c_char];
    // read_only: the statement runs in the caller's snapshot (view_rows reads its rows and
    // the change position in one), and may not write.
    let status = pg_sys::SPI_execute_plan(plan, values.as_mut_ptr(), nulls.as_ptr(), true, 1);
    if status != pg_sys::SPI_OK_SELECT as i32 {
        bad_read("must be a SELECT");
    }
    let table = pg_sys::SPI_tuptable;
    let result = if table.is_null() || pg_sys::SPI_processed == 0 {
        None
    } else {
        let mut is_null = false;
        let value = pg_sys::SPI_getbinval(*(*table).vals, (*table).tupdesc, 1, &mut is_null);
        if is_null {
            None
        } else {
            if pg_sys::SPI_gettypeid((*table).tupdesc, 1) != pg_sys::JSONBOID {
                bad_read("must return jsonb");
            }
            // Copied (and detoasted) into the caller's context, which outlives SPI's.
            let old = pg_sys::MemoryContextSwitchTo(caller_context);
            let copied = pg_sys::pg_detoast_datum_copy(value.cast_mut_ptr());
            pg_sys::MemoryContextSwitchTo(old);
            Some(RawJsonb(pg_sys::Datum::from(copied)))
        }
    };
    pg_sys::SPI_finish();
    result
}

/// A jsonb value passed through as PostgreSQL holds it: the rows of a view are not worth
/// turning into Rust values and back.
#[derive(Clone, Copy)]
pub struct RawJsonb(pg_sys::Datum);

impl FromDatum for RawJsonb {
    unsafe fn from_polymorphic_datum(
        datum: pg_sys::Datum,
        is_null: bool,
        _: pg_sys::Oid,
    ) -> Option<RawJsonb> {
        (!is_null).then_some(RawJsonb(datum))
    }
}

impl IntoDatum for RawJsonb {
    fn into_datum(self) -> Option<pg_sys::Datum> {
        Some(self.0)
    }

    fn type_oid() -> pg_sys::Oid {
        pg_sys::JSONBOID
    }
}

pgrx::impl_sql_translatable!(RawJsonb, "jsonb");

unsafe impl<'fcx> ArgAbi<'fcx> for RawJsonb {
    unsafe fn unbox_arg_unchecked(arg: Arg<'_, 'fcx>) -> Self {
        let index = arg.index();
        // SAFETY: the argument is declared jsonb; FromDatum keeps its Datum as it is.
        unsafe { arg.unbox_arg_using_from_datum() }
            .unwrap_or_else(|| panic!("argument {index} must not be null"))
    }

    unsafe fn unbox_nullable_arg(arg: Arg<'_, 'fcx>) -> Nullable<Self> {
        // SAFETY: as above.
        unsafe { arg.unbox_arg_using_from_datum() }.into()
    }
}

unsafe impl BoxRet for RawJsonb {
    unsafe fn box_into<'fcx>(self, fcinfo: &mut FcInfo<'fcx>) -> Datum<'fcx> {
        // SAFETY: a jsonb Datum in the caller's memory context (first_value copied it there).
        unsafe { fcinfo.return_raw_datum(self.0) }
    }
}
