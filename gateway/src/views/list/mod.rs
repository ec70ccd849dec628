//! A named list view (`place.create_view`): the rows of a watched table, filtered and
//! ordered, at most `limit` of them, each subscriber's window kept by the gateway. The
//! kind's entry (its params and `build`) is here; the rest, one job a file:
//! - `registry.rs`: the instances, one per (view, limit), read when first asked for;
//! - `changes.rs`: which instances a commit may have changed;
//! - `refresh.rs`: reading an instance again, paced;
//! - `definitions.rs`: a view created, defined anew or dropped, checked before acted on
//!   (`view_checks.rs`: the names waiting for that check);
//! - `instance.rs`: one instance, its window and its log (`diff.rs`: the events from one
//!   window to the next).

pub mod changes;
pub mod definitions;
pub mod diff;
pub mod instance;
pub mod refresh;
pub mod registry;
pub mod view_checks;

use crate::errors::RpcError;
use crate::params::read_named;
use crate::shared_log::LogCursor;
use crate::views::list::instance::ListView;
use crate::views::list::registry::Lists;
use crate::views::made::Made;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};
use std::sync::Arc;

/// A named list view's params.
#[derive(Deserialize, JsonSchema)]
pub struct ListViewParams {
    /// How many rows (at least 1; the view's `max_limit` when absent or larger).
    pub limit: Option<i32>,
}

/// A named list view (`place.create_view`).
pub async fn build(
    lists: &Arc<Lists>,
    name: &str,
    view_params: &Map<String, Value>,
) -> Result<Made<Arc<ListView>, LogCursor>, RpcError> {
    // The view first: a client that names no view of ours hears that, whatever its params.
    let only_limit: Map<String, Value> = view_params
        .iter()
        .filter(|(name, _)| *name == "limit")
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect();
    let limit = read_named::<ListViewParams>(only_limit)?.limit;
    if let Some(limit) = limit {
        if limit < 1 {
            return Err(RpcError::invalid_params(format!(
                "`limit` must be at least 1, not {limit}"
            )));
        }
    }
    let view = lists.get(name, limit).await?;
    read_named::<ListViewParams>(view_params.clone())?;
    Ok(instance::made(view, view_params, None))
}
