//! The database layer, one binary (`cargo test -p pgplace-tests --test database`): real
//! connections to the cluster and no gateway — placements racing one user's cooldown, dump
//! and restore, a held snapshot, notifications, random placements against a model, every
//! function with random arguments as each role, concurrent watched writes — and the
//! layout checks (files only).

mod cooldown_race;
mod dump_restore;
mod held_snapshot;
mod layout;
mod notifications;
mod randomized;
mod sql_fuzz;
mod watch_concurrency;
