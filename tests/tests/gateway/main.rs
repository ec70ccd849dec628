//! The gateway layer, one binary (`cargo test -p pgplace-tests --test gateway`): gateways
//! in this process over real HTTP against the cluster, one feature a file. Tests run side by
//! side, so none may depend on what another does to the process: /metrics is the
//! process's, and a test reads only the series of views it alone names.

mod as_player;
mod cancel;
mod forged_notifications;
mod freezing;
mod gone_clients;
mod guests;
mod hostile;
mod http_stacks;
mod knobs;
mod legacy_names;
mod limits;
mod lists;
mod lists_random;
mod one_placer;
mod png;
mod presence;
mod protocol;
mod regions;
mod retry_safe_placement;
mod sign_in;
mod signed_in_elsewhere;
mod standby_required;
mod stream;
