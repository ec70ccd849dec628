//! Checking a list view's filter from its parsed and analysed tree, before anything is
//! planned or built with it.
//!
//! A filter is pasted into the query that reads the view (as the table's owner) and into
//! `views_touched`'s test of changed rows. It must be an immutable boolean expression over
//! the row's watched columns, using only what is built into PostgreSQL (functions,
//! operators, types with OIDs below `FirstNormalObjectId`): then reading it runs nobody's
//! code. The analysis runs as the role that asked for the view (`callers.rs`), under
//! `SECURITY_RESTRICTED_OPERATION`: analysing can run code (a literal cast to a composite
//! type runs its columns' input and domain checks), and what runs then is what that role
//! could run by typing the filter.

use crate::acting_as::{refuse_in_restricted_operation, ActingAs};
use crate::owner_reads::{check_caller_is_extension_owner, WatchedTable};
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::ffi::{c_void, CStr, CString};

/// Checks `filter` against table `tbl`, whose columns `visible` a view may use; raises the
/// error that names what is wrong (42703 a column that is not watched, 22023 not an
/// immutable boolean expression over the row, 42501 not built into PostgreSQL). Returns
/// whether the filter reads a float column (`place.views.touch_always`). The analysis runs
/// as `analyser`: the view's creator.
#[pg_extern(volatile, parallel_unsafe, name = "_check_filter")]
fn check_filter_as(
    view_name: &str,
    tbl: pg_sys::Oid,
    visible: Vec<Option<String>>,
    filter: &str,
    analyser: pg_sys::Oid,
) -> bool {
    check_caller_is_extension_owner();
    let Some(visible) = visible.into_iter().collect::<Option<Vec<String>>>() else {
        ereport!(
            PgLogLevel::ERROR,
            PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
            "visible must not contain NULL"
        );
        unreachable!()
    };
    let table = WatchedTable::lock(tbl);
    // Newlines around it: a trailing `--` comment must not swallow the closing parenthesis.
    let sql = CString::new(format!(
        "SELECT FROM ONLY {} t WHERE (\n{filter}\n)",
        table.name
    ))
    .unwrap_or_else(|_| error!("a filter must not contain a NUL byte"));
    let acting = ActingAs::begin(analyser);
    // SAFETY: parse analysis of one statement in the current memory context; the tree is
    // only read.
    let findings = unsafe { analyse(&sql, tbl, visible) };
    acting.end();
    findings.raise(view_name, filter);
    findings.reads_float
}

/// 0.8.7's `_check_filter`, for a schema not yet updated: it analyses as the login, as
/// 0.8.7 did, but never inside a security-restricted operation, where the login is not who
/// runs the code that asks (an index expression during ANALYZE, a hook in a view's read).
#[pg_extern(volatile, parallel_unsafe, sql = false)]
fn _check_filter(
    view_name: &str,
    tbl: pg_sys::Oid,
    visible: Vec<Option<String>>,
    filter: &str,
) -> bool {
    refuse_in_restricted_operation("place.create_view");
    // SAFETY: reads the backend's session identity.
    let login = unsafe { pg_sys::GetSessionUserId() };
    check_filter_as(view_name, tbl, visible, filter, login)
}

#[derive(Default)]
struct Findings {
    tbl: pg_sys::Oid,
    visible: Vec<String>,
    subquery: bool,
    mutable: bool,
    whole_row: bool,
    unwatched: Vec<String>,
    not_builtin: Vec<String>,
    reads_float: bool,
}

impl Findings {
    fn raise(&self, view_name: &str, filter: &str) {
        let not_an_expression = |why: &str| {
            ereport!(
                PgLogLevel::ERROR,
                PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                format!("filter {filter} of view {view_name} is not an immutable boolean expression over the row: {why}"),
                "No subqueries, no volatile or stable functions (now(), random()): a view must change only when its rows change."
            )
        };
        if self.subquery {
            not_an_expression("it uses a subquery");
        }
        if !self.unwatched.is_empty() {
            // Said as the parser says an unknown column; place._prepare_view adds the filter.
            ereport!(
                PgLogLevel::ERROR,
                PgSqlErrorCode::ERRCODE_UNDEFINED_COLUMN,
                format!(
                    "column \"{}\" is not watched",
                    self.unwatched.join("\", \"")
                ),
                format!(
                    "A filter may use these columns: {}",
                    self.visible.join(", ")
                )
            );
        }
        if self.whole_row {
            not_an_expression("it uses the whole row or a system column");
        }
        if !self.not_builtin.is_empty() {
            ereport!(
                PgLogLevel::ERROR,
                PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
                format!(
                    "filter {filter} of view {view_name} uses {}, which is not built into PostgreSQL",
                    self.not_builtin.join(", ")
                ),
                "A filter may use only the functions, operators and types of pg_catalog."
            );
        }
        if self.mutable {
            not_an_expression("it calls a function that is not immutable");
        }
    }
}

unsafe fn analyse(sql: &CStr, tbl: pg_sys::Oid, visible: Vec<String>) -> Findings {
    let statements = pg_sys::pg_parse_query(sql.as_ptr());
    if statements.is_null() || (*statements).length != 1 {
        ereport!(
            PgLogLevel::ERROR,
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            "a filter must be one expression"
        );
    }
    let raw = pg_sys::list_nth(statements, 0) as *mut pg_sys::RawStmt;
    let query = pg_sys::parse_analyze_fixedparams(
        raw,
        sql.as_ptr(),
        std::ptr::null(),
        0,
        std::ptr::null_mut(),
    );
    // The text was built around the locked table's name: it must read that table alone.
    let rtable = (*query).rtable;
    let rte = pg_sys::list_nth(rtable, 0) as *mut pg_sys::RangeTblEntry;
    if (*rtable).length != 1 || (*rte).relid != tbl {
        ereport!(
            PgLogLevel::ERROR,
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            "a filter must read only its view's table"
        );
    }
    let mut findings = Findings {
        tbl,
        visible,
        subquery: (*query).hasSubLinks || (*query).hasAggs || (*query).hasWindowFuncs,
        ..Findings::default()
    };
    if findings.subquery {
        // Refused whatever else it holds; a subquery's tree is not an expression to walk.
        return findings;
    }
    let quals = (*(*query).jointree).quals;
    findings.mutable = pg_sys::contain_mutable_functions(quals);
    walk(quals, &mut findings as *mut Findings as *mut c_void);
    findings
}

/// Visits every node of the filter (expression_tree_walker's callback).
#[pg_guard]
unsafe extern "C-unwind" fn walk(node: *mut pg_sys::Node, context: *mut c_void) -> bool {
    if node.is_null() {
        return false;
    }
    let findings = &mut *(context as *mut Findings);
    match (*node).type_ {
        // Containers, not expressions: their members are visited.
        pg_sys::NodeTag::T_List | pg_sys::NodeTag::T_CaseWhen => {}
        pg_sys::NodeTag::T_SubLink | pg_sys::NodeTag::T_Query => {
            findings.subquery = true;
            return true;
        }
        pg_sys::NodeTag::T_Var => {
            let var = node as *mut pg_sys::Var;
            if (*var).varattno <= 0 {
                findings.whole_row = true;
            } else {
                let name =
                    CStr::from_ptr(pg_sys::get_attname(findings.tbl, (*var).varattno, false))
                        .to_string_lossy()
                        .into_owned();
                if !findings.visible.contains(&name) && !findings.unwatched.contains(&name) {
                    findings.unwatched.push(name);
                }
            }
            let typ = (*var).vartype;
            findings.reads_float |= typ == pg_sys::FLOAT4OID || typ == pg_sys::FLOAT8OID;
            check_type(findings, typ);
        }
        _ => check_type(findings, pg_sys::exprType(node)),
    }
    match (*node).type_ {
        pg_sys::NodeTag::T_OpExpr
        | pg_sys::NodeTag::T_DistinctExpr
        | pg_sys::NodeTag::T_NullIfExpr => {
            check_operator(findings, (*(node as *mut pg_sys::OpExpr)).opno)
        }
        pg_sys::NodeTag::T_ScalarArrayOpExpr => {
            check_operator(findings, (*(node as *mut pg_sys::ScalarArrayOpExpr)).opno)
        }
        _ => {}
    }
    // Every function the node runs: its own, an operator's, a cast's, a type's I/O.
    pg_sys::check_functions_in_node(node, Some(check_function), context);
    pg_sys::expression_tree_walker(node, Some(walk), context)
}

#[pg_guard]
unsafe extern "C-unwind" fn check_function(function: pg_sys::Oid, context: *mut c_void) -> bool {
    if u32::from(function) >= pg_sys::FirstNormalObjectId {
        let findings = &mut *(context as *mut Findings);
        note(findings, pg_sys::format_procedure(function));
    }
    false
}

unsafe fn check_operator(findings: &mut Findings, operator: pg_sys::Oid) {
    if u32::from(operator) >= pg_sys::FirstNormalObjectId {
        note(findings, pg_sys::format_operator(operator));
    }
}

unsafe fn check_type(findings: &mut Findings, typ: pg_sys::Oid) {
    if u32::from(typ) >= pg_sys::FirstNormalObjectId {
        note(findings, pg_sys::format_type_be(typ));
    }
}

unsafe fn note(findings: &mut Findings, what: *mut std::ffi::c_char) {
    let what = CStr::from_ptr(what).to_string_lossy().into_owned();
    if !findings.not_builtin.contains(&what) {
        findings.not_builtin.push(what);
    }
}
