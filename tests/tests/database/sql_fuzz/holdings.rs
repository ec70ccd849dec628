//! What every role holds (`HOLDINGS`), before and after the hostile phases, and what one
//! gained.

use super::*;

/// What a role could gain, each a query of (key, value, the roles and databases the row is
/// about), read by the superuser in the fuzz's database. The first four are cluster-wide.
pub(super) const HOLDINGS: &[(&str, &str)] = &[
    (
        "role",
        "SELECT rolname::text,
                format('superuser %s, createrole %s, createdb %s, bypassrls %s, replication %s, \
                        login %s, inherit %s, connection limit %s, settings %s',
                       rolsuper, rolcreaterole, rolcreatedb, rolbypassrls, rolreplication,
                       rolcanlogin, rolinherit, rolconnlimit, coalesce(rolconfig::text, 'none')),
                ARRAY[rolname::text]
         FROM pg_roles",
    ),
    (
        "membership",
        "SELECT format('%s in %s', member::regrole, roleid::regrole),
                format('admin option %s, granted by %s', admin_option, grantor::regrole),
                ARRAY[member::regrole::text, roleid::regrole::text, grantor::regrole::text]
         FROM pg_auth_members",
    ),
    (
        "role setting",
        "SELECT format('%s in %s', setrole::regrole,
                       coalesce((SELECT datname FROM pg_database WHERE oid = setdatabase)::text, 'every database')),
                setconfig::text,
                ARRAY[setrole::regrole::text,
                      'database ' || coalesce((SELECT datname FROM pg_database WHERE oid = setdatabase)::text, '')]
         FROM pg_db_role_setting",
    ),
    (
        "database",
        "SELECT datname::text,
                format('owned by %s', datdba::regrole)
                  || CASE WHEN datname = current_database() THEN format(', acl %s', coalesce(datacl::text, 'default')) ELSE '' END,
                ARRAY['database ' || datname, datdba::regrole::text]
         FROM pg_database",
    ),
    (
        "relation",
        "SELECT c.oid::regclass::text,
                format('kind %s, owned by %s, acl %s, row security %s', c.relkind, c.relowner::regrole,
                       coalesce(c.relacl::text, 'default'), c.relrowsecurity),
                '{}'::text[]
         FROM pg_class c
         WHERE c.relnamespace NOT IN ('pg_catalog'::regnamespace, 'information_schema'::regnamespace,
                                      'pg_toast'::regnamespace)
           AND c.relpersistence <> 't'",
    ),
    (
        "function",
        "SELECT p.oid::regprocedure::text,
                format('owned by %s, acl %s, security definer %s, settings %s', p.proowner::regrole,
                       coalesce(p.proacl::text, 'default'), p.prosecdef,
                       coalesce(p.proconfig::text, 'none')),
                '{}'::text[]
         FROM pg_proc p
         WHERE p.pronamespace NOT IN ('pg_catalog'::regnamespace, 'information_schema'::regnamespace)",
    ),
    (
        "type",
        "SELECT t.oid::regtype::text, format('owned by %s, acl %s', t.typowner::regrole,
                       coalesce(t.typacl::text, 'default')),
                '{}'::text[]
         FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
         WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')
           AND n.nspname !~ '^pg_(toast_)?temp_'",
    ),
    (
        "cast",
        "SELECT format('%s as %s', castsource::regtype, casttarget::regtype),
                format('through %s, context %s', castfunc::regprocedure, castcontext), '{}'::text[]
         FROM pg_cast WHERE oid >= 16384",
    ),
    (
        "schema",
        "SELECT nspname::text, format('owned by %s, acl %s', nspowner::regrole,
                       coalesce(nspacl::text, 'default')), '{}'::text[]
         FROM pg_namespace WHERE nspname !~ '^pg_(toast_)?temp_'",
    ),
    (
        "extension",
        "SELECT extname::text, format('owned by %s, version %s, schema %s', extowner::regrole,
                                      extversion, extnamespace::regnamespace), '{}'::text[]
         FROM pg_extension",
    ),
    (
        "language",
        "SELECT lanname::text, format('owned by %s, trusted %s, acl %s', lanowner::regrole,
                                      lanpltrusted, coalesce(lanacl::text, 'default')), '{}'::text[]
         FROM pg_language",
    ),
    (
        "event trigger",
        "SELECT evtname::text, format('owned by %s, runs %s, enabled %s', evtowner::regrole,
                                      evtfoid::regproc, evtenabled), '{}'::text[]
         FROM pg_event_trigger",
    ),
    (
        "default privileges",
        "SELECT format('%s in %s on %s', defaclrole::regrole, defaclnamespace::regnamespace, defaclobjtype),
                defaclacl::text, '{}'::text[]
         FROM pg_default_acl",
    ),
    // Watching the admin's own table adds triggers to it and a row to place.watches;
    // nothing else may change either.
    (
        "trigger",
        "SELECT format('%s on %s', t.tgname, t.tgrelid::regclass),
                format('runs %s, enabled %s', t.tgfoid::regproc, t.tgenabled), '{}'::text[]
         FROM pg_trigger t WHERE NOT t.tgisinternal AND t.tgrelid <> 'fz_mine'::regclass",
    ),
    (
        "watch",
        "SELECT w.tbl::text, format('columns %s, all rows %s', w.columns, w.all_rows), '{}'::text[]
         FROM place.watches w WHERE w.tbl <> 'fz_mine'::regclass",
    ),
];

/// One reading of `HOLDINGS`: (what, key) -> (value, the roles and databases it is about).
pub(super) struct Holdings {
    pub(super) rows: BTreeMap<(&'static str, String), (String, Vec<String>)>,
    /// Every role, and every database as "database <name>".
    pub(super) names: BTreeSet<String>,
}

pub(super) async fn holdings(client: &Client) -> Holdings {
    let mut rows = BTreeMap::new();
    let mut names = BTreeSet::new();
    for &(what, sql) in HOLDINGS {
        for row in client
            .query(sql, &[])
            .await
            .unwrap_or_else(|e| panic!("reading the {what} holdings: {e}"))
        {
            let key: String = row.get(0);
            let value: Option<String> = row.get(1);
            match what {
                "role" => {
                    names.insert(key.clone());
                }
                "database" => {
                    names.insert(format!("database {key}"));
                }
                _ => {}
            }
            let about: Vec<String> = row.get(2);
            let previous = rows.insert((what, key.clone()), (value.unwrap_or_default(), about));
            assert!(previous.is_none(), "two {what} rows named {key}");
        }
    }
    Holdings { rows, names }
}

/// What differs between the readings before and after the hostile phases. A row about a
/// role or a database that came or went meanwhile is another test's (they share the
/// cluster) and is left out, but a role that came must hold nothing that matters: no
/// attribute beyond LOGIN and INHERIT, no membership of a superuser, of a predefined pg_
/// role or of this test's roles.
pub(super) async fn gained(client: &Client, before: &Holdings, after: &Holdings) -> Vec<String> {
    let moved: BTreeSet<&String> = before.names.symmetric_difference(&after.names).collect();
    if !moved.is_empty() {
        println!("sql_fuzz: came or went during the hostile phases (other tests'?): {moved:?}");
    }
    let about_moved = |row: Option<&(String, Vec<String>)>| {
        row.is_some_and(|(_, about)| about.iter().any(|n| moved.contains(n)))
    };
    let mut lines = Vec::new();
    let keys: BTreeSet<&(&str, String)> = before.rows.keys().chain(after.rows.keys()).collect();
    for key in keys {
        let (was, now) = (before.rows.get(key), after.rows.get(key));
        if about_moved(was) || about_moved(now) {
            continue;
        }
        let (what, name) = key;
        match (was, now) {
            (Some(was), Some(now)) if was.0 == now.0 => {}
            (Some(was), Some(now)) => {
                lines.push(format!("- gained: {what} {name}: {} -> {}", was.0, now.0))
            }
            (Some(was), None) => lines.push(format!(
                "- gained: {what} {name} is gone (it was {})",
                was.0
            )),
            (None, Some(now)) => lines.push(format!("- gained: a new {what} {name}: {}", now.0)),
            (None, None) => unreachable!(),
        }
    }
    let before_roles: Vec<&str> = before
        .rows
        .keys()
        .filter(|(what, _)| *what == "role")
        .map(|(_, name)| name.as_str())
        .collect();
    let privileged = client
        .query(
            "SELECT r.rolname::text FROM pg_roles r
             WHERE NOT r.rolname = ANY($1)
               AND (r.rolsuper OR r.rolcreaterole OR r.rolcreatedb OR r.rolbypassrls OR r.rolreplication
                    OR EXISTS (SELECT FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid
                               WHERE m.member = r.oid
                                 AND (g.rolsuper OR g.rolname LIKE 'pg\\_%' OR g.rolname LIKE 'sql\\_fuzz\\_%')))",
            &[&before_roles],
        )
        .await
        .expect("new roles");
    for row in privileged {
        lines.push(format!(
            "- gained: a new role {} with an attribute or membership that matters",
            row.get::<_, String>(0)
        ));
    }
    lines
}
