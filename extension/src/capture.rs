//! The trigger that stages a watched table's changes (`place.watch`, README "The change
//! feed"): after each statement it reads the statement's transition tables and inserts its
//! rows into `place.changes` — one row per 1,000 changed rows, as the JSON array
//! `[[action, key, obj, old], ...]` — stamped with the writer's transaction id. That is all
//! a watched write costs: nothing is locked, counted or announced, and nothing runs at
//! commit. Written in Rust rather than PL/pgSQL because the interpreter's statements cost a
//! writer most of its throughput (README, the benchmark).
//!
//! The trigger's arguments (made by `place.watch`): the key columns and the watched ones as
//! text[] literals (`{id}`, `{a,"b c"}`), the second one empty for every column. The same
//! as for the PL/pgSQL trigger of 0.7.0 and before, so that a dump of a watched table made
//! then restores, and an updated database keeps its triggers.
//!
//! An UPDATE's old and new rows come in the same order; a row whose key changed is matched
//! by key with the statement's other such rows, so that keys swapped within one statement
//! read as updates, not as a delete that follows an insert of the same key. Rows whose
//! watched columns did not change (compared as the JSON text that would be logged) are
//! left out, and a statement that changed nothing watched logs nothing.

use crate::input::fail;
use pgplace_core::array_literal::array_literal;
use pgrx::prelude::*;
use pgrx::{pg_sys, PgMemoryContexts};
use std::collections::HashMap;
use std::ffi::CStr;

/// Rows per staged row of `place.changes`, so that no staged value grows without bound.
const CHUNK: usize = 1000;

unsafe extern "C-unwind" {
    // commands/sequence.h; pgrx has no binding for it (called through the FFI guard, so
    // that an error it raises, a sequence at its end, becomes a Rust panic).
    fn nextval_internal(relid: pg_sys::Oid, check_permissions: bool) -> i64;
}

/// Intervals are written in IntervalStyle 'postgres' whatever the writer's session says
/// (the gateway tests filters on them): set while the rows are turned into JSON, and put
/// back after, also when an error unwinds.
struct IntervalStylePostgres(i32);

impl IntervalStylePostgres {
    unsafe fn set() -> IntervalStylePostgres {
        let was = pg_sys::IntervalStyle;
        pg_sys::IntervalStyle = pg_sys::INTSTYLE_POSTGRES as i32;
        IntervalStylePostgres(was)
    }
}

impl Drop for IntervalStylePostgres {
    fn drop(&mut self) {
        // SAFETY: a plain int the backend reads when it formats an interval.
        unsafe { pg_sys::IntervalStyle = self.0 }
    }
}

#[pg_trigger]
fn _capture_changes<'a>(
    trigger: &'a PgTrigger<'a>,
) -> Result<Option<PgHeapTuple<'a, AllocatedByRust>>, PgTriggerError> {
    let relid = trigger.relid()?;
    let mut staged = Staged::new(relid);
    if matches!(trigger.op()?, PgTriggerOperation::Truncate) {
        staged.push("truncate", "null", "null", "null");
        staged.flush();
        return Ok(None);
    }
    let data = trigger.trigger_data();
    // SAFETY: a statement-level trigger on a table: its relation and, as the triggers
    // place.watch makes ask for them, the transition tables of its event are set.
    unsafe {
        let relation = data.tg_relation;
        let desc = (*relation).rd_att;
        refuse_types_not_built_in(relation, desc);
        let columns = Columns::from_args(desc, &trigger.extra_args()?);
        let _style = IntervalStylePostgres::set();
        let mut memory = PgMemoryContexts::new("pgplace change capture");
        match trigger.op()? {
            // An inserted row is the change's new row, a deleted one its old row.
            op @ (PgTriggerOperation::Insert | PgTriggerOperation::Delete) => {
                let inserted = matches!(op, PgTriggerOperation::Insert);
                let store = if inserted {
                    data.tg_newtable
                } else {
                    data.tg_oldtable
                };
                let mut rows = TransitionRows::open(store, desc);
                while rows.next() {
                    let (key, row) = memory.switch_to(|_| {
                        (columns.key.json(rows.slot), columns.watched.json(rows.slot))
                    });
                    memory.reset();
                    if inserted {
                        staged.push("insert", &key, &row, "null");
                    } else {
                        staged.push("delete", &key, "null", &row);
                    }
                }
            }
            PgTriggerOperation::Update => {
                let mut old_rows = TransitionRows::open(data.tg_oldtable, desc);
                let mut new_rows = TransitionRows::open(data.tg_newtable, desc);
                let mut moved = Moved::default();
                while old_rows.next() && new_rows.next() {
                    let (old_key, old, new_key, new) = memory.switch_to(|_| {
                        (
                            columns.key.json(old_rows.slot),
                            columns.watched.json(old_rows.slot),
                            columns.key.json(new_rows.slot),
                            columns.watched.json(new_rows.slot),
                        )
                    });
                    memory.reset();
                    if old_key != new_key {
                        moved.left(old_key, old);
                        moved.came(new_key, new);
                    } else if old != new {
                        staged.push("update", &new_key, &new, &old);
                    }
                }
                moved.stage(&mut staged);
            }
            PgTriggerOperation::Truncate => unreachable!("handled above"),
        }
    }
    staged.flush();
    Ok(None)
}

/// This trigger runs as the extension's owner and turns rows into JSON, which runs a
/// type's cast to json: a column of a type a user made (an enum with a cast, a composite
/// of a typed table, a domain) would run that user's code as a superuser. `watch` and the
/// DDL guard refuse such columns, but a table can gain one in ways no guard sees (`ALTER
/// TYPE ... CASCADE` on a typed table, a column added through a partitioned parent): so
/// the trigger itself refuses, before any row is read, every statement on a table with a
/// column whose type is not built into PostgreSQL. One pass over the columns per statement.
unsafe fn refuse_types_not_built_in(relation: pg_sys::Relation, desc: pg_sys::TupleDesc) {
    let table = pgrx::PgTupleDesc::from_pg_unchecked(desc);
    for attribute in table.iter() {
        if attribute.attisdropped || u32::from(attribute.atttypid) < pg_sys::FirstNormalObjectId {
            continue;
        }
        let name = CStr::from_ptr(pg_sys::get_rel_name((*relation).rd_id)).to_string_lossy();
        let column = CStr::from_ptr(attribute.attname.data.as_ptr()).to_string_lossy();
        ereport!(
            PgLogLevel::ERROR,
            PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
            format!(
                "watched table {name} has column {column} of a type that is not built into PostgreSQL; \
                 pgplace does not turn it into JSON"
            ),
            "Change the column to a built-in type, or unwatch the table (SELECT place.unwatch(tbl))."
        );
    }
}

/// The columns a change names: the key, and the watched ones (None: the whole row).
struct Columns {
    key: Pick,
    watched: Pick,
}

impl Columns {
    /// From the trigger's arguments; a column the table no longer has is an error (the
    /// event trigger that guards watched tables keeps that from happening).
    unsafe fn from_args(desc: pg_sys::TupleDesc, args: &[String]) -> Columns {
        let malformed =
            || -> ! { error!("pgplace: the watch trigger's arguments are malformed: {args:?}") };
        let [keys, watched] = args else { malformed() };
        let keys = array_literal(keys)
            .filter(|k| !k.is_empty())
            .unwrap_or_else(|| malformed());
        let watched = match watched.as_str() {
            "" => Pick::Row,
            list => Pick::of(desc, &array_literal(list).unwrap_or_else(|| malformed())),
        };
        Columns {
            key: Pick::of(desc, &keys),
            watched,
        }
    }
}

/// Some columns of a row, as the JSON object `row_to_json` makes of them.
enum Pick {
    /// Every column of the row.
    Row,
    /// The named ones: their attribute numbers, and a row type made of them.
    Some(Vec<usize>, pg_sys::TupleDesc),
}

impl Pick {
    unsafe fn of(desc: pg_sys::TupleDesc, names: &[String]) -> Pick {
        let table = pgrx::PgTupleDesc::from_pg_unchecked(desc);
        let numbers: Vec<usize> = names
            .iter()
            .map(|name| {
                table
                    .iter()
                    .position(|a| {
                        !a.attisdropped
                            && CStr::from_ptr(a.attname.data.as_ptr()).to_bytes() == name.as_bytes()
                    })
                    .unwrap_or_else(|| {
                        fail(
                            PgSqlErrorCode::ERRCODE_UNDEFINED_COLUMN,
                            format!("watched column {name:?} is no longer in its table"),
                        )
                    })
            })
            .collect();
        let picked = pg_sys::CreateTemplateTupleDesc(numbers.len() as i32);
        for (i, n) in numbers.iter().enumerate() {
            pg_sys::TupleDescCopyEntry(picked, (i + 1) as i16, desc, (*n + 1) as i16);
        }
        Pick::Some(numbers, pg_sys::BlessTupleDesc(picked))
    }

    /// The picked columns of the row in `slot` as a JSON object.
    unsafe fn json(&self, slot: *mut pg_sys::TupleTableSlot) -> String {
        let row = match self {
            Pick::Row => pg_sys::ExecFetchSlotHeapTupleDatum(slot),
            Pick::Some(numbers, desc) => {
                pg_sys::slot_getallattrs(slot);
                let values = (*slot).tts_values;
                let nulls = (*slot).tts_isnull;
                let mut picked_values: Vec<pg_sys::Datum> =
                    numbers.iter().map(|n| *values.add(*n)).collect();
                let mut picked_nulls: Vec<bool> = numbers.iter().map(|n| *nulls.add(*n)).collect();
                let tuple = pg_sys::heap_form_tuple(
                    *desc,
                    picked_values.as_mut_ptr(),
                    picked_nulls.as_mut_ptr(),
                );
                pg_sys::HeapTupleHeaderGetDatum((*tuple).t_data)
            }
        };
        pgrx::direct_function_call::<String>(pg_sys::row_to_json, &[Some(row)])
            .expect("row_to_json of a row is not NULL")
    }
}

/// The rows of one transition table, read with a read pointer of their own (another
/// trigger of the statement may read the same table).
struct TransitionRows {
    store: *mut pg_sys::Tuplestorestate,
    pointer: i32,
    slot: *mut pg_sys::TupleTableSlot,
}

impl TransitionRows {
    unsafe fn open(store: *mut pg_sys::Tuplestorestate, desc: pg_sys::TupleDesc) -> TransitionRows {
        if store.is_null() {
            error!("pgplace: a watch trigger without its transition table (was it made by place.watch?)");
        }
        let pointer = pg_sys::tuplestore_alloc_read_pointer(store, 0);
        pg_sys::tuplestore_select_read_pointer(store, pointer);
        pg_sys::tuplestore_rescan(store);
        let slot = pg_sys::MakeSingleTupleTableSlot(desc, &pg_sys::TTSOpsMinimalTuple);
        TransitionRows {
            store,
            pointer,
            slot,
        }
    }

    unsafe fn next(&mut self) -> bool {
        pg_sys::tuplestore_select_read_pointer(self.store, self.pointer);
        pg_sys::tuplestore_gettupleslot(self.store, true, false, self.slot)
    }
}

impl Drop for TransitionRows {
    fn drop(&mut self) {
        // SAFETY: the slot was made by MakeSingleTupleTableSlot and is dropped once.
        unsafe { pg_sys::ExecDropSingleTupleTableSlot(self.slot) }
    }
}

/// The rows of an UPDATE whose key changed, matched by key once the statement is read: a
/// key that left and came back is an update of it.
#[derive(Default)]
struct Moved {
    left: Vec<(String, String)>,
    came: Vec<(String, String)>,
}

impl Moved {
    fn left(&mut self, key: String, old: String) {
        self.left.push((key, old));
    }

    fn came(&mut self, key: String, new: String) {
        self.came.push((key, new));
    }

    fn stage(self, staged: &mut Staged) {
        let mut came: HashMap<String, String> = self.came.iter().cloned().collect();
        for (key, old) in &self.left {
            match came.remove(key) {
                Some(new) if new != *old => staged.push("update", key, &new, old),
                Some(_) => {}
                None => staged.push("delete", key, "null", old),
            }
        }
        for (key, new) in &self.came {
            if came.remove(key).is_some() {
                staged.push("insert", key, new, "null");
            }
        }
    }
}

/// Inserts one staged row into `place.changes` as its own code would through SQL, but
/// without the executor (and so without asking the writer for rights on the table, as
/// SQL would): the heap row, then its index entries. A quarter of a watched write's cost
/// went to running that one INSERT through SPI. The row's JSON is made by this file, of
/// `row_to_json` texts, so it is not parsed again.
unsafe fn stage(relid: pg_sys::Oid, chunk: &str) {
    let place = pg_sys::get_namespace_oid(c"place".as_ptr(), false);
    let changes = pg_sys::get_relname_relid(c"changes".as_ptr(), place);
    let numbers = pg_sys::get_relname_relid(c"change_n_seq".as_ptr(), place);
    if changes == pg_sys::InvalidOid || numbers == pg_sys::InvalidOid {
        error!("pgplace: place.changes or place.change_n_seq is missing (ALTER EXTENSION pgplace UPDATE)");
    }
    let relation = pg_sys::table_open(changes, pg_sys::RowExclusiveLock as pg_sys::LOCKMODE);
    let desc = (*relation).rd_att;
    if (*desc).natts != 4 {
        error!("pgplace: place.changes does not have the columns of this version (ALTER EXTENSION pgplace UPDATE)");
    }
    let xid = pg_sys::GetTopFullTransactionId().value;
    let n = pg_sys::submodules::ffi::pg_guard_ffi_boundary(|| nextval_internal(numbers, false));
    let rows = pg_sys::cstring_to_text_with_len(chunk.as_ptr().cast(), chunk.len() as i32);
    let mut values = [
        pg_sys::Datum::from(xid),
        pg_sys::Datum::from(n),
        pg_sys::Datum::from(relid),
        pg_sys::Datum::from(rows),
    ];
    let mut nulls = [false; 4];
    let tuple = pg_sys::heap_form_tuple(desc, values.as_mut_ptr(), nulls.as_mut_ptr());
    // Heap insert, index entries (the primary key's: plain columns, no expression): what
    // PostgreSQL itself does for its catalogs.
    pg_sys::CatalogTupleInsert(relation, tuple);
    pg_sys::heap_freetuple(tuple);
    pg_sys::table_close(relation, pg_sys::RowExclusiveLock as pg_sys::LOCKMODE);
}

/// The statement's changes, written to `place.changes` a chunk at a time.
struct Staged {
    relid: pg_sys::Oid,
    chunk: String,
    rows: usize,
}

impl Staged {
    fn new(relid: pg_sys::Oid) -> Staged {
        Staged {
            relid,
            chunk: String::new(),
            rows: 0,
        }
    }

    /// One change; `key`, `obj` and `old` are JSON texts.
    fn push(&mut self, action: &str, key: &str, obj: &str, old: &str) {
        self.chunk.push(if self.rows == 0 { '[' } else { ',' });
        for part in ["[\"", action, "\",", key, ",", obj, ",", old, "]"] {
            self.chunk.push_str(part);
        }
        self.rows += 1;
        if self.rows == CHUNK {
            self.flush();
        }
    }

    fn flush(&mut self) {
        if self.rows == 0 {
            return;
        }
        self.chunk.push(']');
        let chunk = std::mem::take(&mut self.chunk);
        self.rows = 0;
        // SAFETY: the relation and sequence are pgplace's own, looked up by name in this
        // database; the row has their columns' types.
        unsafe { stage(self.relid, &chunk) };
    }
}
