//! Checking that a piece of SQL text (a view's filter) is exactly one expression.
//!
//! `place.create_view` pastes a filter into the queries it builds and runs them with the
//! extension owner's rights, so a filter such as `true) OR (SELECT ... ` or one that ends
//! a statement and starts another must be refused before anything runs. The server's own
//! parser decides: `SELECT (<text>)` must parse to one plain SELECT of one column with no
//! other clause. Whether the expression is boolean, immutable and over the row only is
//! checked afterwards by the SQL side (`_prepare_view`).

use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::PgTryBuilder;
use std::ffi::CString;

/// Whether `text` is one SQL expression (false for syntax errors too).
#[pg_extern(immutable, strict, parallel_safe)]
fn _is_one_expression(text: &str) -> bool {
    // Newlines around it: a trailing `--` comment must not swallow the closing parenthesis.
    let Ok(sql) = CString::new(format!("SELECT (\n{text}\n)")) else {
        return false;
    };
    PgTryBuilder::new(|| parses_to_one_expression(&sql))
        .catch_others(|_| false)
        .execute()
}

fn parses_to_one_expression(sql: &CString) -> bool {
    // SAFETY: raw_parser reads a NUL-terminated string and returns a List of RawStmt
    // nodes allocated in the current memory context (or raises an ERROR, caught above);
    // every pointer is checked for NULL and for its node tag before it is read.
    unsafe {
        let statements = pg_sys::raw_parser(sql.as_ptr(), pg_sys::RawParseMode::RAW_PARSE_DEFAULT);
        if statements.is_null() || (*statements).length != 1 {
            return false;
        }
        let raw = pg_sys::list_nth(statements, 0) as *mut pg_sys::RawStmt;
        if raw.is_null() || (*raw).type_ != pg_sys::NodeTag::T_RawStmt {
            return false;
        }
        let stmt = (*raw).stmt as *mut pg_sys::SelectStmt;
        if stmt.is_null() || (*stmt).type_ != pg_sys::NodeTag::T_SelectStmt {
            return false;
        }
        let s = &*stmt;
        let one_target = !s.targetList.is_null() && (*s.targetList).length == 1;
        one_target
            && s.op == pg_sys::SetOperation::SETOP_NONE
            && s.distinctClause.is_null()
            && s.intoClause.is_null()
            && s.fromClause.is_null()
            && s.whereClause.is_null()
            && s.groupClause.is_null()
            && s.havingClause.is_null()
            && s.windowClause.is_null()
            && s.valuesLists.is_null()
            && s.sortClause.is_null()
            && s.limitOffset.is_null()
            && s.limitCount.is_null()
            && s.lockingClause.is_null()
            && s.withClause.is_null()
    }
}
