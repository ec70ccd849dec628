//! The calls: random arguments for every argument type and name (extremes, NULLs, odd
//! text, the fixture's boards and users), and which function to call next.

use super::*;

/// One argument: its SQL, its value when it is a plain integer, and whether its cast may
/// fail (then it is tried alone first, so a cast error is never blamed on the function).
#[derive(Clone)]
pub(super) struct Arg {
    pub(super) sql: String,
    pub(super) int: Option<i64>,
    pub(super) risky: bool,
}

/// Functions that delete what they are given.
const DELETING: [&str; 2] = ["delete_board", "erase_user"];

pub(super) fn int(v: i64) -> Arg {
    Arg {
        sql: v.to_string(),
        int: Some(v),
        risky: false,
    }
}
pub(super) fn expr(sql: impl Into<String>) -> Arg {
    Arg {
        sql: sql.into(),
        int: None,
        risky: false,
    }
}
pub(super) fn risky(sql: impl Into<String>) -> Arg {
    Arg {
        sql: sql.into(),
        int: None,
        risky: true,
    }
}
pub(super) fn null() -> Arg {
    expr("NULL")
}
pub(super) fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

pub(super) const I32_EXTREMES: &[i64] = &[
    0,
    -1,
    1,
    i16::MIN as i64,
    i16::MAX as i64,
    i16::MAX as i64 + 1,
    i32::MIN as i64,
    i32::MAX as i64,
    i32::MAX as i64 - 1,
    65_535,
    65_536,
    4_096,
    4_097,
    16_777_216,
    16_777_217,
];
pub(super) const I64_EXTREMES: &[i64] = &[
    0,
    -1,
    1,
    i16::MIN as i64,
    i32::MIN as i64,
    i32::MAX as i64,
    i32::MAX as i64 + 1,
    i64::MIN,
    i64::MAX,
    i64::MAX - 1,
    i64::MIN + 1,
    999_999,
];
/// Numbers no integer type holds: their cast fails (22003), which is PostgreSQL's.
pub(super) const HUGE: &[&str] = &[
    "2147483648",
    "-2147483649",
    "9223372036854775808",
    "-9223372036854775809",
    "99999999999999999999999999",
];
pub(super) const INTERVALS: &[&str] = &[
    "0",
    "1 microsecond",
    "1 second",
    "0.5 seconds",
    "5 minutes",
    "1 hour",
    "1 day",
    "366 days",
    "367 days",
    "3660 days",
    "3661 days",
    "-1 day",
    "-1 microsecond",
    "1 month",
    "1 year",
    "1 mon -30 days",
    "1 day -24 hours",
    "1000000 years",
    "-1000000 years",
    "2147483647 days",
    "-2147483648 days",
    "2147483647 hours",
    "-2147483647 hours",
    "178000000 years",
    "infinity",
    "-infinity",
    "3000000000 hours",
    "@ 1 minute ago",
    "P1Y2M3DT4H5M6S",
    "PT0.000001S",
];
pub(super) const TIMESTAMPS: &[&str] = &[
    "infinity",
    "-infinity",
    "4713-01-01 00:00:00+00 BC",
    "4714-11-24 00:00:00+00 BC",
    "4714-11-23 00:00:00+00 BC",
    "294276-12-31 23:59:59+00",
    "294277-01-01 00:00:00+00",
    "epoch",
    "2000-01-01 00:00:00+00",
    "1999-12-31 23:59:59.999999+00",
    "9999-12-31 23:59:59+00",
    "today",
    "tomorrow",
    "yesterday",
];
pub(super) const TIMESTAMP_EXPRESSIONS: &[&str] = &[
    "now()",
    "now() - interval '1 second'",
    "now() - interval '1 hour'",
    "now() + interval '1 hour'",
    "now() + interval '10 years'",
    "now() - interval '1 day'",
    "clock_timestamp()",
    "now() - interval '2 seconds'",
];
pub(super) const STATES: &[&str] = &[
    "open", "paused", "frozen", "closed", "OPEN", "", " open", "deleted",
];
pub(super) const REGCLASSES: &[&str] = &[
    "'fz_items'",
    "'fz_items'",
    "'fz_other'",
    "'fz_mine'",
    "'fz_nopk'",
    "'fz_parent'",
    "'fz_child'",
    "'fz_view'",
    "'fz_seq'",
    "'place.boards'",
    "'place.placements'",
    "'place.user_tokens'",
    "'pg_class'",
    "'pg_catalog.pg_proc'",
    "'information_schema.tables'",
    "'0'",
    "'1'",
    "'4294967295'",
    "'12345678'",
    "'no_such_table'",
    "'\"FZ_ITEMS\"'",
];
pub(super) const JSONS: &[&str] = &[
    "null",
    "{}",
    "[]",
    "[{}]",
    "[null]",
    "{\"id\": 1}",
    "{\"id\": 3}",
    "{\"id\": \"3\"}",
    "{\"id\": 999999}",
    "{\"id\": -1}",
    "{\"id\": 1e400}",
    "{\"id\": 9223372036854775808}",
    "{\"id\": null}",
    "{\"nope\": 1}",
    "{\"id\": [1]}",
    "{\"id\": {\"id\": 1}}",
    "[1, 2, 3]",
    "\"text\"",
    "42",
    "true",
    "[{\"id\": 1, \"n\": 5, \"title\": \"a\"}]",
    "[{\"id\": 1, \"n\": \"x\"}]",
    "[{\"key\": {\"id\": 1}, \"obj\": {\"n\": 5, \"title\": \"a\"}}]",
    "[{\"key\": {\"id\": 1}, \"obj\": {\"n\": 1}, \"old\": {\"n\": 9}}]",
    "[{\"key\": null, \"obj\": null}]",
    "{\"board\": 1, \"compact\": true}",
    "{\"id\": \"'; DROP TABLE fz_items; --\"}",
    "{\"\\u00e9\": \"\\ud83c\\udfa8\"}",
];
pub(super) const FILTERS: &[&str] = &[
    "n > 3",
    "title = 'a'",
    "n > 3 AND title <> 'x'",
    "n IS NULL",
    "true",
    "false",
    "1",
    "NULL",
    "n >",
    "n > 3; DROP TABLE fz_items",
    "n > 3) OR (true",
    "secret = 'x'",
    "nope = 1",
    "now() > '2020-01-01'",
    "random() < 0.5",
    "(SELECT true)",
    "n IN (SELECT 1)",
    "pg_sleep(0.01) IS NOT NULL",
    "place.get_tile(1, 0, 0) = 0",
    "length(title) > 2",
    "title ~ '['",
    "n / 0 = 1",
    "upper(title) = 'A'",
    "n::text = '3'",
    "",
    "--",
    "/*",
    "$$",
    "n > 3 --",
    "title = E'\\\\'",
];
pub(super) const ORDER_BYS: &[&str] = &[
    "n",
    "title",
    "n, title",
    "title,n",
    "secret",
    "nope",
    "",
    ",",
    "n desc",
    "n; DROP TABLE fz_items",
    "id",
    "N",
    "\"n\"",
    " n ",
];

/// A random text argument: empty, blank, long, unicode, SQL-ish, control characters.
pub(super) fn odd_text(rng: &mut StdRng, serial: usize) -> Arg {
    match rng.random_range(0..16) {
        0 => expr("''"),
        1 => expr("' '"),
        2 => expr(quote(&"x".repeat(64))),
        3 => expr(quote(&"y".repeat(65))),
        4 => expr("repeat('é', 100000)"),
        5 => expr(quote("ünïcødé 🎨 \u{202e}rtl\u{202c} z\u{200d}w")),
        6 => expr(quote("'); DROP TABLE place.boards; --")),
        7 => expr(quote("Robert'); DROP SCHEMA place CASCADE; --")),
        8 => expr("'a' || chr(10) || 'b' || chr(9)"),
        9 => expr(quote("%s %n %d \\ \\\\ $1 $$")),
        10 => expr("'NULL'"),
        11 => expr(quote(&"🎨".repeat(64))),
        12 => expr(quote(&"🎨".repeat(65))),
        13 => expr("repeat('ab', 5000)"),
        _ => expr(quote(&format!("fz-{serial}"))),
    }
}

/// What a call's arguments are drawn from: the fixture and a per-call array length.
pub(super) struct Generator {
    pub(super) rng: StdRng,
    pub(super) boards: Vec<i64>,
    pub(super) users: Vec<i64>,
    pub(super) board_names: Vec<String>,
    pub(super) token: String,
    pub(super) serial: usize,
    /// This call's arguments are all plausible (no NULL, no extreme), so that enough
    /// placements are accepted for the invariants to mean something.
    pub(super) sane: bool,
}

impl Generator {
    pub(super) fn new(seed: u64, fx: &Fixture) -> Generator {
        Generator {
            rng: StdRng::seed_from_u64(seed),
            boards: fx.boards.clone(),
            users: fx.users.clone(),
            board_names: fx.board_names.clone(),
            token: fx.token.clone(),
            serial: 0,
            sane: false,
        }
    }
    pub(super) fn chance(&mut self, p: f64) -> bool {
        self.rng.random_bool(p)
    }
    pub(super) fn pick<T: Clone>(&mut self, items: &[T]) -> T {
        items[self.rng.random_range(0..items.len())].clone()
    }

    pub(super) fn board(&mut self) -> Arg {
        if self.chance(0.85) {
            let b = self.pick(&self.boards.clone());
            int(b)
        } else {
            int(self.pick(&[
                0,
                -1,
                i64::MAX,
                i64::MIN,
                999_999,
                self.boards.len() as i64 + 50,
            ]))
        }
    }
    pub(super) fn user(&mut self) -> i64 {
        if self.chance(0.9) {
            self.pick(&self.users.clone())
        } else {
            self.pick(&[0, -1, i64::MAX, i64::MIN, 999_999])
        }
    }
    /// A small number that suits coordinates and colours, or an extreme.
    pub(super) fn small_or_extreme(&mut self, below: i64, wide: bool) -> Arg {
        if self.chance(0.8) {
            int(self.rng.random_range(0..below))
        } else if self.chance(0.1) {
            risky(self.pick(HUGE))
        } else if wide {
            int(self.pick(I64_EXTREMES))
        } else {
            int(self.pick(I32_EXTREMES))
        }
    }
    pub(super) fn interval(&mut self) -> Arg {
        if self.chance(0.1) {
            return expr("now() - now()");
        }
        risky(quote(self.pick(INTERVALS)))
    }
    pub(super) fn timestamp(&mut self) -> Arg {
        if self.chance(0.5) {
            expr(self.pick(TIMESTAMP_EXPRESSIONS))
        } else {
            risky(quote(self.pick(TIMESTAMPS)))
        }
    }
    /// An array of `len` elements made by `element`, now and then with a NULL in it; a
    /// huge length is written as a generate_series over `huge` (an expression of g).
    pub(super) fn array(
        &mut self,
        len: usize,
        huge: &str,
        mut element: impl FnMut(&mut Self) -> String,
    ) -> Arg {
        if len > 1_000 {
            return expr(format!(
                "(SELECT array_agg({huge}) FROM generate_series(1, {len}) g)"
            ));
        }
        let mut items: Vec<String> = (0..len).map(|_| element(self)).collect();
        if len > 0 && !self.sane && self.chance(0.05) {
            let i = self.rng.random_range(0..len);
            items[i] = "NULL".into();
        }
        let risky_items = items.iter().any(|i| HUGE.contains(&i.as_str()));
        let sql = format!("'{{{}}}'", items.join(","));
        Arg {
            sql,
            int: None,
            risky: risky_items,
        }
    }
    pub(super) fn array_len(&mut self) -> usize {
        match self.rng.random_range(0..100) {
            0..=4 => 0,
            5..=64 => self.rng.random_range(1..=5),
            65..=94 => self.rng.random_range(6..=60),
            95..=96 => 100_000,
            97 => 100_001,
            _ => self.rng.random_range(500..=1_000),
        }
    }
    pub(super) fn name(&mut self) -> Arg {
        self.serial += 1;
        if self.chance(0.5) {
            return expr(quote(&format!("fz-{}", self.serial)));
        }
        if self.chance(0.2) {
            let name = self.pick(&self.board_names.clone());
            return expr(quote(&name));
        }
        odd_text(&mut self.rng, self.serial)
    }
    pub(super) fn palette(&mut self) -> Arg {
        let colours = |n: usize, rng: &mut StdRng| -> String {
            let items: Vec<String> = (0..n)
                .map(|_| format!("\"#{:06x}\"", rng.random_range(0..0x1000000)))
                .collect();
            format!("'{{{}}}'", items.join(","))
        };
        match self.rng.random_range(0..12) {
            0 => expr("'{}'"),
            1 => expr("'{NULL}'"),
            2 => expr(colours(2, &mut self.rng)),
            3 => expr(colours(4, &mut self.rng)),
            4 => expr(colours(16, &mut self.rng)),
            5 => expr(colours(256, &mut self.rng)),
            6 => expr(colours(257, &mut self.rng)),
            7 => expr("'{\"#zzzzzz\",\"#000000\"}'"),
            8 => expr("'{\"#FFF\",\"red\",\"\"}'"),
            9 => expr("'{\"#FFFFFF\",\"#000000\",NULL}'"),
            10 => expr(colours(1, &mut self.rng)),
            _ => expr("'{\"#000000 \",\" #ffffff\"}'"),
        }
    }
    pub(super) fn session_id(&mut self) -> Arg {
        match self.rng.random_range(0..10) {
            0 => expr("''"),
            1 => expr("'short'"),
            2 => expr("repeat('s', 100000)"),
            3 => odd_text(&mut self.rng, 0),
            _ => expr(quote(&format!(
                "fuzz-session-{:04}",
                self.rng.random_range(0..8)
            ))),
        }
    }

    /// An argument chosen by the parameter's name (so that calls get past the first
    /// checks), else by its type.
    pub(super) fn arg(&mut self, function: &str, name: &str, ty: &str, len: usize) -> Arg {
        // The calls that delete never get the fixture's boards and users, which the checks
        // afterwards read (their deleting is tested in regress and isolation).
        if DELETING.contains(&function) && matches!((name, ty), ("board_id" | "user_id", "bigint"))
        {
            return int(self.pick(&[0, -1, i64::MAX, i64::MIN, 999_999]));
        }
        if self.sane {
            match (name, ty) {
                ("board_id", "bigint") => return int(self.pick(&self.boards.clone())),
                ("user_id", "bigint") => return int(self.pick(&self.users.clone())),
                ("x" | "y" | "color", "integer") => return int(self.rng.random_range(0..3)),
                ("user_ids", "bigint[]") => {
                    let users = self.users.clone();
                    return self.array(len, "0", |g| g.pick(&users).to_string());
                }
                ("xs" | "ys" | "colors", "integer[]") => {
                    return self.array(len, "0", |g| g.rng.random_range(0..3).to_string());
                }
                _ => {}
            }
        } else if self.chance(0.06) {
            return null();
        }
        let ty_is = |t: &str| ty == t;
        match (name, ty) {
            ("board_id", "bigint") => self.board(),
            ("user_id", "bigint") | ("public_id", "bigint") if function != "_session_dropped" => {
                int(self.user())
            }
            ("user_ids", "bigint[]") => {
                let users = self.users.clone();
                let one = self.pick(&users);
                // A huge batch ends with a missing user (one valid huge batch runs once,
                // before the fuzz: many would take most of the time budget).
                self.array(
                    len,
                    &format!(
                        "CASE WHEN g = {len} THEN {} ELSE {one} END::bigint",
                        i64::MAX
                    ),
                    |g| g.user().to_string(),
                )
            }
            ("board_ids", "bigint[]") => {
                let b = self.boards[0];
                self.array(len, &format!("{b}::bigint"), |g| g.board().sql)
            }
            ("xs", "integer[]") | ("ys", "integer[]") => self.array(
                len,
                &format!("CASE WHEN g = {len} THEN -1 ELSE g % 7 END"),
                |g| g.small_or_extreme(14, false).sql,
            ),
            ("colors", "integer[]") => self.array(
                len,
                &format!("CASE WHEN g = {len} THEN 256 ELSE g % 2 END"),
                |g| g.small_or_extreme(18, false).sql,
            ),
            ("ns", "bigint[]") | ("seqs", "bigint[]") => {
                self.array(len, "g::bigint", |g| g.small_or_extreme(200, true).sql)
            }
            ("x", "integer") | ("y", "integer") => self.small_or_extreme(14, false),
            ("color", "integer") | ("value", "integer") => self.small_or_extreme(20, false),
            ("width", "integer") | ("height", "integer") => {
                if self.chance(0.75) {
                    int(self.rng.random_range(1..=40))
                } else {
                    self.small_or_extreme(1, false)
                }
            }
            ("bits_per_tile", "integer") => {
                if self.chance(0.8) {
                    int(self.pick(&[1, 2, 4, 8]))
                } else {
                    int(self.pick(&[0, 3, 16, -1, 32, i32::MAX as i64]))
                }
            }
            ("every", "integer") => {
                if self.chance(0.7) {
                    int(self.rng.random_range(1..=20))
                } else {
                    int(self.pick(&[0, -1, 1_000_000, 1_000_001, i32::MAX as i64]))
                }
            }
            ("lim", "integer") | ("max_limit", "integer") | ("count", "integer") => {
                if self.chance(0.7) {
                    int(self.rng.random_range(1..=60))
                } else {
                    int(self.pick(&[
                        0,
                        -1,
                        1_000,
                        1_001,
                        10_000,
                        10_001,
                        100_000,
                        100_001,
                        i32::MAX as i64,
                        i32::MIN as i64,
                    ]))
                }
            }
            ("scale", "integer") => {
                if self.chance(0.7) {
                    int(self.rng.random_range(1..=4))
                } else {
                    int(self.pick(&[0, -1, 100, 1_000, 16_384, 16_385, i32::MAX as i64]))
                }
            }
            ("n", "bigint") => self.small_or_extreme(40, true),
            ("seq", "bigint")
            | ("before_seq", "bigint")
            | ("after_pos", "bigint")
            | ("sub_id", "bigint")
            | ("p", "bigint") => self.small_or_extreme(60, true),
            ("gateway", "bigint") => self.small_or_extreme(4, true),
            ("first_n", "integer") | ("last_n", "integer") => self.small_or_extreme(10, false),
            // Open half the time, or hardly a placement would be accepted.
            ("state", "text") if self.chance(0.5) => expr("'open'"),
            ("state", "text") => expr(quote(self.pick(STATES))),
            ("name", "text") if function == "create_view" || function == "drop_view" => {
                match self.rng.random_range(0..6) {
                    0 => expr("'board'"),
                    1 => expr("'fz_top'"),
                    2 => odd_text(&mut self.rng, self.serial),
                    _ => expr(quote(&format!("fz_view_{}", self.rng.random_range(0..6)))),
                }
            }
            ("view_name", "text") => match self.rng.random_range(0..4) {
                0 => expr("'fz_top'"),
                1 => odd_text(&mut self.rng, 0),
                _ => expr(quote(&format!("fz_view_{}", self.rng.random_range(0..6)))),
            },
            ("view_names", "text[]") => {
                let v = self.pick(&[
                    "'{}'",
                    "'{fz_top}'",
                    "'{fz_top,fz_view_1}'",
                    "'{fz_view_1,fz_view_2}'",
                    "'{nope}'",
                    "'{NULL}'",
                    "'{fz_top,fz_top}'",
                    "'{fz_top,fz_other_top}'",
                ]);
                expr(v)
            }
            ("name", "text") => self.name(),
            ("token", "text") => match self.rng.random_range(0..5) {
                0 => expr(quote(&self.token.clone())),
                1 => expr(quote(&"0".repeat(64))),
                _ => odd_text(&mut self.rng, 0),
            },
            ("id", "text") => self.session_id(),
            ("key", "text") if self.chance(0.4) => expr(self.pick(&["'k1'", "'k2'"])),
            ("key", "text") | ("view", "text") | ("change", "text") => {
                match self.rng.random_range(0..5) {
                    0 => expr("'board/1'"),
                    1 => expr("'board'"),
                    2 => expr("'settings'"),
                    _ => odd_text(&mut self.rng, 0),
                }
            }
            // Without a cooldown half the time, so that users can place again.
            ("cooldown", "interval") if self.chance(0.5) => expr("'0'"),
            // Short enough that tiles freeze during the run.
            ("freeze_after", "interval") if self.chance(0.3) => {
                expr(self.pick(&["'1 second'", "'2 seconds'", "'0.2 seconds'"]))
            }
            ("cooldown", "interval")
            | ("freeze_after", "interval")
            | ("retention", "interval")
            | ("idle", "interval") => self.interval(),
            ("palette", "text[]") => self.palette(),
            // Placement keys: a few names, so that retries (and a key reused for another
            // tile) happen; NULL for none.
            ("keys", "text[]") if self.chance(0.7) => self.array(len, "'k' || g % 3", |g| {
                g.pick(&["k1", "k2", "NULL", "\"\""]).to_string()
            }),
            ("columns", "text[]") | ("cols", "text[]") => expr(self.pick(&[
                "'{title}'",
                "'{title,n}'",
                "'{n}'",
                "'{}'",
                "'{NULL}'",
                "'{nope}'",
                "'{id}'",
                "'{title,title}'",
                "'{\"\"}'",
            ])),
            ("order_by", "text") => expr(quote(self.pick(ORDER_BYS))),
            ("filter", "text") | ("text", "text") => expr(quote(self.pick(FILTERS))),
            ("tbl", "regclass") => risky(self.pick(REGCLASSES)),
            (_, "timestamp with time zone") => self.timestamp(),
            (_, "interval") => self.interval(),
            (_, "integer") => self.small_or_extreme(60, false),
            (_, "bigint") => self.small_or_extreme(60, true),
            (_, "boolean") => expr(self.pick(&["true", "false"])),
            (_, "jsonb") => risky(quote(self.pick(JSONS))),
            (_, "regclass") => risky(self.pick(REGCLASSES)),
            // A role (the bodies of the entry points that authorize their caller take it):
            // the caller, a role that may not own or read anything, or no role at all.
            (_, "regrole") => risky(self.pick(&[
                "current_user::regrole",
                "'pg_monitor'::regrole",
                "'0'::oid::regrole",
            ])),
            // A relation by OID (pgplace's readers of a watched table take it so): one of
            // the tables above, or a number that may name nothing.
            (_, "oid") => {
                if self.chance(0.8) {
                    risky(format!("{}::regclass::oid", self.pick(REGCLASSES)))
                } else {
                    risky(
                        self.pick(&["'0'::oid", "'1'::oid", "'16384'::oid", "'4294967295'::oid"])
                            .to_string(),
                    )
                }
            }
            (_, "xid8") => risky(self.pick(&[
                "'0'",
                "'1'",
                "'3'",
                "'18446744073709551615'",
                "pg_current_xact_id()",
                "'-1'",
            ])),
            // A row's writer (await_durable): special, far, the caller's own, one just
            // before or after the next, a real row's.
            (_, "xid") => risky(self.pick(&[
                "'0'",
                "'2'",
                "'3'",
                "'4294967295'",
                "(txid_current() % 4294967296)::text::xid",
                "((txid_current() + 1000) % 4294967296)::text::xid",
                "((txid_current() - 1) % 4294967296)::text::xid",
                "(SELECT xmin FROM place.placements ORDER BY seq DESC LIMIT 1)",
            ])),
            (_, "pg_snapshot") => risky(self.pick(&[
                "'3:3:'",
                "'1:1:'",
                "'10:20:12,15'",
                "pg_current_snapshot()",
                "'18446744073709551614:18446744073709551615:'",
                "'5:3:'",
            ])),
            (_, "bytea") => match self.rng.random_range(0..7) {
                0 => expr("'\\x'"),
                1 => expr("'\\x00'"),
                2 => expr("'\\xdeadbeef'"),
                3 => expr("decode(repeat('ff', 100000), 'hex')"),
                4 => expr(format!(
                    "(SELECT bits FROM place.board_bits({}))",
                    self.boards[0]
                )),
                5 => expr("'\\x0123456789abcdef0123456789abcdef'"),
                _ => expr("decode(repeat('a5', 513), 'hex')"),
            },
            (_, "text") => odd_text(&mut self.rng, 0),
            (_, "text[]") => expr(self.pick(&["'{}'", "'{a}'", "'{NULL}'", "'{\"\",\" \"}'"])),
            (_, "integer[]") => self.array(len, "g", |g| g.small_or_extreme(20, false).sql),
            (_, "bigint[]") => self.array(len, "g::bigint", |g| g.small_or_extreme(60, true).sql),
            (_, "timestamp with time zone[]") => {
                let ts = self.timestamp();
                if self.chance(0.2) {
                    let edge = self.pick(&[
                        "infinity",
                        "-infinity",
                        "4713-01-01 00:00:00+00 BC",
                        "294276-12-31 23:59:59+00",
                    ]);
                    expr(format!(
                        "array_fill('{edge}'::timestamptz, ARRAY[{}])",
                        len.min(100_000)
                    ))
                } else if len > 1_000 || ts.risky {
                    expr(format!("array_fill(now(), ARRAY[{}])", len.min(100_000)))
                } else {
                    expr(format!(
                        "array_fill(({})::timestamptz, ARRAY[{len}])",
                        ts.sql
                    ))
                }
            }
            _ if ty_is("jsonb[]") => expr("'{}'"),
            _ => {
                // A type this file does not know yet: NULL, and say so once.
                null()
            }
        }
    }
}

/// The refused user's call: `place` or `place_many` with an argument that is always bad.
pub(super) fn refused_call(g: &mut Generator, refused: i64) -> (String, String) {
    let board = g.pick(&g.boards.clone());
    let sql = match g.rng.random_range(0..6) {
        0 => format!("SELECT * FROM place.place({board}, -1, 0, 0, {refused})"),
        1 => format!("SELECT * FROM place.place({board}, 0, 0, -1, {refused})"),
        2 => format!("SELECT * FROM place.place({board}, 0, {}, 0, {refused})", i32::MAX),
        3 => format!("SELECT * FROM place.place({board}, 0, 0, 256, {refused})"),
        4 => format!(
            "SELECT * FROM place.place_many({board}, '{{{refused},{refused}}}', '{{0,1}}', '{{0}}', '{{0,0}}')"
        ),
        _ => format!(
            "SELECT * FROM place.place_many({board}, '{{{refused},{}}}', '{{0,0}}', '{{0,0}}', '{{0,0}}')",
            i64::MAX
        ),
    };
    ("refused".to_string(), sql)
}

/// Weights: the writers of boards most, internal helpers least.
pub(super) fn weights(all: &[Function]) -> Vec<u32> {
    all.iter()
        .map(|f| match f.name.as_str() {
            "place" => 12,
            "place_many" => 8,
            // Bans last (most have no end): unbanning more often keeps most users placing.
            "ban_user" => 1,
            "unban_user" => 4,
            "resize_board" | "set_board_state" | "set_cooldown" | "set_freeze_after"
            | "restore_region" | "revert_user" | "compact_history" => 3,
            _ if f.internal() => 1,
            _ => 2,
        })
        .collect()
}

/// One call: which function (its index in the list), its arguments, how many of them are
/// given (trailing defaults may be left out), and its SQL.
pub(super) struct Call {
    pub(super) function: usize,
    pub(super) args: Vec<Arg>,
    pub(super) keep: usize,
    pub(super) sql: String,
}

/// The next call: a function drawn by weight, then its arguments.
pub(super) fn next_call(g: &mut Generator, all: &[Function], weights: &[u32]) -> Call {
    let mut pick = g.rng.random_range(0..weights.iter().sum::<u32>());
    let mut index = 0;
    while pick >= weights[index] {
        pick -= weights[index];
        index += 1;
    }
    let f = &all[index];
    g.sane = g.chance(0.4);
    let len = if g.sane {
        g.rng.random_range(1..=10)
    } else {
        g.array_len()
    };
    let mut args: Vec<Arg> = f
        .arg_names
        .iter()
        .zip(&f.arg_types)
        .map(|(name, ty)| g.arg(&f.name, name, ty, len))
        .collect();
    // Arrays of different lengths now and then (place_many must refuse them).
    if !g.sane && g.chance(0.05) {
        for (a, ty) in args.iter_mut().zip(&f.arg_types) {
            if ty.ends_with("[]") && a.sql.starts_with("'{") && g.chance(0.5) {
                *a = expr(a.sql.replacen("'{", "'{0,", 1).replace("{0,}", "{0}"));
                break;
            }
        }
    }
    // A resize to millions of tiles is valid, but would make every later call on that
    // fixture board slow: fixture boards stay small (create_board gets the largest sizes).
    if f.name == "resize_board" {
        if let (Some(w), Some(h)) = (args[1].int, args[2].int) {
            if w >= 1 && h >= 1 && w * h > 250_000 {
                args[2] = int(16_777_217);
            }
        }
    }
    // Leave out trailing defaulted arguments now and then.
    let keep = if f.defaults > 0 && g.chance(0.2) {
        args.len() - g.rng.random_range(1..=f.defaults)
    } else {
        args.len()
    };
    let typed: Vec<String> = args[..keep]
        .iter()
        .zip(&f.arg_types)
        .map(|(a, ty)| format!("({})::{ty}", a.sql))
        .collect();
    let sql = format!("SELECT * FROM place.{}({})", f.name, typed.join(", "));
    Call {
        function: index,
        args,
        keep,
        sql,
    }
}
