//! What building a view of any kind gives: the instance, where its new subscriber stands,
//! and what to answer and store (`views::build` wraps it in the view contract).

use bytes::Bytes;
use serde_json::{Map, Value};

pub struct Made<V, C> {
    pub view: V,
    /// Where the subscriber starts.
    pub cursor: C,
    /// The initial state (or, resumed with `since`, `{"seq": since, "resumed": true}`).
    pub state: Bytes,
    /// The params to store (`since` replaced by the stored seq).
    pub params: Map<String, Value>,
    pub board: Option<i64>,
    /// A board view's starting seq.
    pub seq: Option<i64>,
    /// Only a session bound to a user may subscribe (a list view made so).
    pub signed_in: bool,
}
