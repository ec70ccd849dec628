//! The fleet layer, one binary (`cargo test -p pgplace-tests --test fleet`): several
//! gateways, gateway processes behind nginx, a standby, PostgreSQL restarted, a failover,
//! and the tests that measure this process (its /metrics, its memory). Each holds
//! [`pgplace_tests::alone`] for its whole run: one restarts the cluster or reads what every
//! gateway of the process counts, so none may run beside another.

mod client_input;
mod ha_commit;
mod ha_durable;
mod ha_failover;
mod ha_standby_required;
mod memory;
mod metrics;
mod pg_restart;
mod replica;
mod scale_out;
mod scale_out_faults;
mod shutdown;
