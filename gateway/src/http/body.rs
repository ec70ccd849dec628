//! Reading a whole request body, bounded in size and in time: what every route that takes a
//! body (POST /jsonrpc, a forwarded group) must do before it parses, so that a client
//! cannot hold memory or a connection with a body that is too large or never ends.

use bytes::Bytes;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use hyper::body::Incoming;
use std::time::Duration;

/// Why a body was not read.
pub enum BodyError {
    /// Larger than the limit, in bytes.
    TooLarge(usize),
    /// The connection failed or the body was malformed (chunked encoding, say).
    Unreadable(String),
    /// Not all of it arrived within the time, in seconds.
    Late(u64),
}

/// The whole body, if it is at most `limit` bytes and all of it arrives within `within`.
pub async fn read(incoming: Incoming, limit: usize, within: Duration) -> Result<Bytes, BodyError> {
    // Boxed: its timer is freed once the body is in, not kept in the state of a request
    // that then waits for events.
    let read = Box::pin(tokio::time::timeout(
        within,
        Limited::new(incoming, limit).collect(),
    ));
    match read.await {
        Ok(Ok(body)) => Ok(body.to_bytes()),
        Ok(Err(error)) if error.downcast_ref::<LengthLimitError>().is_some() => {
            Err(BodyError::TooLarge(limit))
        }
        Ok(Err(error)) => Err(BodyError::Unreadable(error.to_string())),
        Err(_) => Err(BodyError::Late(within.as_secs())),
    }
}
