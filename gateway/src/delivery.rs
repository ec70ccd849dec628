//! Whether a legacy poll's answer reached its client.
//!
//! A `get_events` without `ack` moves the session's positions past what it answers. If the
//! answer never arrives (the client went away before reading it), those events must come
//! with the session's next poll instead of being lost. So the session keeps its positions
//! from before the answer until the connection shows the answer was received:
//! - the client sent another request on the connection (an HTTP/1.1 client reads an answer
//!   before it sends its next request), or
//! - when the connection ends, the client's TCP stack has acknowledged every byte sent.
//!
//! A client that closed its socket before the answer arrived answers it with a reset, not
//! an acknowledgement; then, and on any doubt, the positions go back and the events come
//! again. A later answer to the session (on any connection) settles the earlier one: the
//! client came back for more.

use crate::sessions::Session;
use std::future::Future;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::net::TcpStream;

/// The legacy answers sent on one connection that are not yet known to be received.
#[derive(Default)]
pub struct ConnectionDeliveries {
    pending: Mutex<Vec<(Weak<Session>, u64)>>,
}

tokio::task_local! {
    /// The connection a request came on: methods register their answers with it without
    /// every layer between the route and the method carrying it.
    static CONNECTION: Arc<ConnectionDeliveries>;
}

/// How long, once a connection ends, its client's TCP stack has to acknowledge the last
/// answer before it is sent again.
const ACKNOWLEDGE_WITHIN: Duration = Duration::from_secs(2);

impl ConnectionDeliveries {
    pub fn new() -> Arc<Self> {
        Arc::default()
    }

    /// Runs a request's handler with this connection as the one its answers go out on.
    pub fn scope<F: Future>(self: &Arc<Self>, handler: F) -> impl Future<Output = F::Output> {
        CONNECTION.scope(self.clone(), handler)
    }

    /// A new request on the connection: its client has read every earlier answer.
    pub fn received_all(&self) {
        for (session, token) in self.take() {
            if let Some(session) = session.upgrade() {
                session.answer_received(token);
            }
        }
    }

    /// The connection failed before its answers were known to arrive: they come again.
    pub fn lost_all(&self) {
        for (session, token) in self.take() {
            if let Some(session) = session.upgrade() {
                session.answer_lost(token);
            }
        }
    }

    pub fn has_pending(&self) -> bool {
        !self.lock().is_empty()
    }

    /// Settles the answers still pending when the connection has ended (`failed`: on an
    /// error of the socket), by what the client's TCP stack does with them: it acknowledged
    /// every byte and then closed its side, or keeps it open (received); or it answered
    /// with a reset, because the client closed before reading (lost).
    pub async fn settle(&self, mut stream: TcpStream, failed: bool) {
        if !self.has_pending() {
            return;
        }
        if failed {
            return self.lost_all();
        }
        // Our end first, so a client reading to the end of the answer is not kept waiting.
        let _ = tokio::io::AsyncWriteExt::shutdown(&mut stream).await;
        let deadline = tokio::time::Instant::now() + ACKNOWLEDGE_WITHIN;
        loop {
            let closed = match stream.try_read(&mut [0; 512]) {
                Ok(0) => true,
                Ok(_) => false,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => false,
                Err(_) => return self.lost_all(),
            };
            let acknowledged = match acknowledged(&stream) {
                Some(acknowledged) => acknowledged,
                None => return self.lost_all(),
            };
            if acknowledged && closed {
                return self.received_all();
            }
            if tokio::time::Instant::now() >= deadline {
                return if acknowledged {
                    self.received_all()
                } else {
                    self.lost_all()
                };
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    fn take(&self) -> Vec<(Weak<Session>, u64)> {
        std::mem::take(&mut *self.lock())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(Weak<Session>, u64)>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Registers a legacy answer (`token`, from the session) with the connection it goes out
/// on. Outside a connection (a method called directly) it counts as received at once.
pub fn register(session: &Arc<Session>, token: u64) {
    let registered = CONNECTION.try_with(|connection| {
        connection.lock().push((Arc::downgrade(session), token));
    });
    if registered.is_err() {
        session.answer_received(token);
    }
}

/// Whether the peer acknowledged every byte sent on `stream`: Some(true) yes, Some(false)
/// not yet, None never (the connection was reset, or the socket cannot tell). A reset
/// also empties the send queue, so it is looked for first.
#[cfg(target_os = "linux")]
fn acknowledged(stream: &TcpStream) -> Option<bool> {
    use std::os::fd::AsRawFd;
    if let Ok(Some(_)) | Err(_) = stream.take_error() {
        return None;
    }
    let mut queued: libc::c_int = 0;
    // SAFETY: the descriptor is an open TCP socket while `stream` lives, and TIOCOUTQ
    // writes one c_int.
    let counted = unsafe { libc::ioctl(stream.as_raw_fd(), libc::TIOCOUTQ, &mut queued) };
    (counted == 0).then_some(queued == 0)
}

#[cfg(not(target_os = "linux"))]
fn acknowledged(_stream: &TcpStream) -> Option<bool> {
    Some(true)
}
