//! Which SQLSTATEs a call may end with: the documented ones, and what is known to need
//! the extension's SQL mended (`KNOWN`).

/// Every SQLSTATE the README's Validation table lists.
pub(super) const DOCUMENTED: &[&str] = &[
    "22004", "22003", "22023", "2202E", "42704", "23505", "55000", "42501", "54000", "40001",
];

/// Errors the function tables name for one function, beyond the Validation table.
pub(super) fn documented_for(function: &str) -> &'static [&'static str] {
    match function {
        "watch" => &["42809", "0A000", "42703"],
        "unwatch" => &["2BP01"],
        "kick" => &["P0002"],
        "create_view" => &["42703", "42883"],
        "_check_watchable" => &["42809", "0A000"],
        _ => &[],
    }
}

/// What this fuzz found that needs a change of the extension's SQL (a versioned update
/// script) to mend: tolerated, and printed on every run, until a release fixes it — then
/// remove the line (the run says when one no longer shows up).
pub(super) const KNOWN: &[(&str, &str, &str)] = &[
    (
        "session_expire",
        "22008",
        "an idle so long that now() - idle leaves the timestamp range ('1000000 years'): \
         'timestamp out of range' instead of 22003 naming idle and its range",
    ),
    (
        "session_subscribe",
        "23503",
        "an unknown board_id: a foreign key violation instead of 42704",
    ),
    (
        "session_subscribe",
        "23502",
        "a NULL key, view, params or sub_id: a not-null violation instead of 22004",
    ),
    (
        "session_set_user",
        "23503",
        "an unknown user_id: a foreign key violation instead of 42704",
    ),
];

/// Whether `code` may come back from `function`, and why.
pub(super) fn verdict(function: &str, code: &str) -> Result<&'static str, ()> {
    if code.starts_with("XX") && !(code == "XX001" && function.starts_with('_')) {
        return Err(()); // an internal error; XX001 is what helpers say of inconsistent input
    }
    if code == "P0001" || code == "57014" {
        return Err(()); // a bare RAISE; the statement timeout
    }
    if DOCUMENTED.contains(&code) || documented_for(function).contains(&code) {
        return Ok("documented");
    }
    // The values of a JSON argument cast to a table's column types: PostgreSQL's own cast.
    // And a view's filter, which the DBA wrote, may fail on a row ('n / 0 = 1', "title ~ '['"
    // pass every check of its shape): its own data exception comes back from the readers,
    // and from create_view when it meets such a row while checking the view's query.
    if matches!(
        function,
        "kick" | "views_touched" | "view_rows" | "create_view"
    ) && code.starts_with("22")
    {
        return Ok("cast");
    }
    if KNOWN.iter().any(|(f, c, _)| *f == function && *c == code) {
        return Ok("known");
    }
    if function.starts_with('_') {
        return Ok("internal"); // helpers document no errors: only the rules above apply
    }
    Err(())
}
