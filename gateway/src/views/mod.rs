//! What a session subscribes to: a board's regions and newest placements, and list views.

pub mod events;
pub mod list;
pub mod list_diff;
pub mod lists;
pub mod recent;
pub mod region;
pub mod view_checks;
