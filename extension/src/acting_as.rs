//! Running a piece of work as another role, the way PostgreSQL itself runs user code for
//! REFRESH MATERIALIZED VIEW, ANALYZE and index builds (`matview.c`, `analyze.c`).
//!
//! pgplace's SECURITY DEFINER functions run as the extension's owner, a superuser. Whatever
//! they plan or run over a user's relation can run that user's code (index predicates and
//! expressions, statistics expressions, policies, defaults, a filter's literals): never
//! with those rights. [`ActingAs::begin`] switches the current user to a role that could
//! run the code anyway, with `SECURITY_RESTRICTED_OPERATION` (no SET ROLE, no temporary
//! objects, no cursors or prepared statements that outlive it) and a GUC nest level, so
//! settings the code changes are undone when the work ends.

use pgrx::pg_sys;

/// The identity and settings to go back to. `end` restores them; if the work raised an
/// ERROR instead, dropping it restores the identity while the error unwinds, and the
/// (sub)transaction's abort undoes the settings, as it does for PostgreSQL's own callers.
pub struct ActingAs {
    user: pg_sys::Oid,
    context: i32,
    nest: i32,
}

impl ActingAs {
    pub fn begin(role: pg_sys::Oid) -> ActingAs {
        let mut user = pg_sys::InvalidOid;
        let mut context = 0;
        // SAFETY: the calls PostgreSQL's ANALYZE makes around an owner's index expressions;
        // the saved identity is valid for the rest of this call.
        unsafe {
            pg_sys::GetUserIdAndSecContext(&mut user, &mut context);
            pg_sys::SetUserIdAndSecContext(
                role,
                context | pg_sys::SECURITY_RESTRICTED_OPERATION as i32,
            );
            ActingAs {
                user,
                context,
                nest: pg_sys::NewGUCNestLevel(),
            }
        }
    }

    pub fn end(self) {
        // SAFETY: closes the nest level opened in `begin` (undoing any setting the work
        // changed), then `drop` restores the identity.
        unsafe { pg_sys::AtEOXact_GUC(false, self.nest) };
    }
}

impl Drop for ActingAs {
    fn drop(&mut self) {
        // SAFETY: the identity saved in `begin`.
        unsafe { pg_sys::SetUserIdAndSecContext(self.user, self.context) };
    }
}

/// Running as the extension's owner, as a SECURITY DEFINER function does, from a C entry
/// point that runs as its caller (`callers.rs`): the security context is kept (a caller in
/// a security-restricted operation stays in one).
pub struct Privileged {
    user: pg_sys::Oid,
    context: i32,
}

impl Privileged {
    pub fn begin() -> Privileged {
        let owner = extension_owner();
        let mut user = pg_sys::InvalidOid;
        let mut context = 0;
        // SAFETY: the switch fmgr_security_definer makes; restored by `end` or `drop`.
        unsafe {
            pg_sys::GetUserIdAndSecContext(&mut user, &mut context);
            pg_sys::SetUserIdAndSecContext(
                owner,
                context | pg_sys::SECURITY_LOCAL_USERID_CHANGE as i32,
            );
        }
        Privileged { user, context }
    }

    pub fn end(self) {}
}

impl Drop for Privileged {
    fn drop(&mut self) {
        // SAFETY: the identity saved in `begin`.
        unsafe { pg_sys::SetUserIdAndSecContext(self.user, self.context) };
    }
}

/// The extension's owner: the owner of schema `place`, which `CREATE EXTENSION` made.
pub fn extension_owner() -> pg_sys::Oid {
    // SAFETY: catalog lookups by name and OID; both exist while the extension does.
    unsafe {
        let namespace = pg_sys::get_namespace_oid(c"place".as_ptr(), false);
        let tuple = pg_sys::SearchSysCache1(
            pg_sys::SysCacheIdentifier::NAMESPACEOID as i32,
            pg_sys::Datum::from(namespace),
        );
        if tuple.is_null() {
            pgrx::error!("schema place is missing");
        }
        let owner =
            (*pg_sys::heap_tuple_get_struct::<pg_sys::FormData_pg_namespace>(tuple)).nspowner;
        pg_sys::ReleaseSysCache(tuple);
        owner
    }
}

/// The current user: inside pgplace's SECURITY DEFINER functions, the extension's owner.
pub fn current_user() -> pg_sys::Oid {
    // SAFETY: reads the backend's current identity.
    unsafe { pg_sys::GetUserId() }
}

/// No entry point that authorizes its caller, and no read or lock of a watched table, runs
/// inside a security-restricted operation: code running there (an index or statistics
/// expression during ANALYZE or autovacuum, a table owner's hook inside a view's read) runs
/// on another role's behalf, and has no reason to watch a table, make a view or read one.
pub fn refuse_in_restricted_operation(what: &str) {
    // SAFETY: reads the backend's security context.
    if unsafe { pg_sys::InSecurityRestrictedOperation() } {
        pgrx::ereport!(
            pgrx::PgLogLevel::ERROR,
            pgrx::PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            format!("{what} cannot run inside a security-restricted operation"),
            "It was called by code PostgreSQL runs on another role's behalf (an index or statistics expression, ANALYZE, a view's read): call it directly."
        );
    }
}
