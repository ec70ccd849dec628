//! Whether a legacy poll's answer reached its client.
//!
//! A `get_events` without `ack` moves the session's positions past what it answers. If the
//! answer never arrives (the client went away before reading it), those events must come
//! with the session's next poll instead of being lost. So the session keeps its positions
//! from before the answer until the connection shows the answer was received:
//! - the client sent another request on the connection after the answer was written (an
//!   HTTP/1.1 client reads an answer before it sends its next request; a request that was
//!   already on its way - pipelined behind a waiting poll - proves nothing, `Traffic`), or
//! - when the connection ends, the client's TCP stack has acknowledged every byte sent.
//!
//! A client that closed its socket before the answer arrived answers it with a reset, not
//! an acknowledgement; then, and on any doubt, the positions go back and the events come
//! again. A poll of the session on another connection meanwhile asks the earlier
//! connection's socket (`acknowledged_now`): not all acknowledged (a connection gone
//! silent), the new answer carries the earlier one's events too (`Session::take_events`).

use crate::lock::lock;
use crate::views::Position;
use std::future::Future;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// What a connection tells the session of its legacy answers.
pub trait Answers: Send + Sync {
    /// The answer `token` reached its client: its positions stand (once every answer
    /// given with it has).
    fn answer_received(&self, token: u64);
    /// The answer `token` did not reach its client: its events come again.
    fn answer_lost(&self, token: u64);
}

/// How long a legacy poll waits for the acknowledgement of the session's earlier answer
/// on another connection (a client's TCP stack may hold it back up to 200 ms, and the
/// client may have read the answer and polled again meanwhile; a connection gone silent
/// does not acknowledge within it).
pub const EARLIER_ANSWER_ACKNOWLEDGED_WITHIN: Duration = Duration::from_millis(300);

/// A session's legacy answers not yet known to have reached the client.
pub struct Unconfirmed {
    /// Their tokens: one, or several answered together on one connection (a batch).
    pub tokens: Vec<u64>,
    /// The `local` positions before the first of them, by subscription.
    pub before: Vec<(u64, Position)>,
    /// The connection they went out on.
    pub connection: Option<Arc<ConnectionDeliveries>>,
}

/// What becomes of the earlier answer when a legacy poll takes events.
pub enum Earlier {
    /// Given on the same connection (earlier in the same batch): it stays pending with
    /// this one.
    Pending(Unconfirmed),
    /// Given on another connection whose client's TCP stack acknowledged everything.
    Arrived,
    /// Its client came back without it (a connection gone silent, a client that gave up
    /// waiting): the views go back to `before`, and this answer carries its events again.
    Lost(Unconfirmed),
}

impl Unconfirmed {
    /// Whether a poll on `current` should wait a moment for this answer's acknowledgement
    /// (`EARLIER_ANSWER_ACKNOWLEDGED_WITHIN`): while its connection is open with bytes
    /// unacknowledged, and while it has ended but is not yet settled. A client that closes
    /// after each answer (`Connection: close`, HTTP/1.0, a proxy's default upstream) sends
    /// its next poll on a new connection at once; by then the earlier socket may be closed
    /// on both sides, which it cannot tell from a reset, while `settle` (which read the
    /// client's FIN or its reset) gives its verdict within milliseconds.
    pub fn awaited_by(&self, current: Option<&Arc<ConnectionDeliveries>>) -> bool {
        match (&self.connection, current) {
            (Some(a), Some(b)) if Arc::ptr_eq(a, b) => false,
            (Some(a), _) => a.acknowledged_now() != Some(true),
            (None, _) => false,
        }
    }

    /// Settled before a legacy poll on `connection` takes events.
    pub fn settle(self, connection: Option<&Arc<ConnectionDeliveries>>) -> Earlier {
        let same_connection = matches!(
            (&self.connection, connection),
            (Some(a), Some(b)) if Arc::ptr_eq(a, b)
        );
        if same_connection {
            return Earlier::Pending(self);
        }
        let arrived = self
            .connection
            .as_ref()
            .is_none_or(|c| c.acknowledged_now() == Some(true));
        if arrived {
            return Earlier::Arrived;
        }
        Earlier::Lost(Unconfirmed {
            tokens: Vec::new(),
            before: self.before,
            connection: None,
        })
    }

    /// `token` arrived; true when every answer given with it has.
    pub fn received(&mut self, token: u64) -> bool {
        self.tokens.retain(|t| *t != token);
        self.tokens.is_empty()
    }
}

/// The legacy answers sent on one connection that are not yet known to be received.
#[derive(Default)]
pub struct ConnectionDeliveries {
    pending: Mutex<Vec<(Weak<dyn Answers>, u64)>>,
    /// The connection's socket while it is open: a poll of the session on another
    /// connection asks it whether an earlier answer arrived. Cleared before the socket is
    /// closed (under this lock), so a closed descriptor's number is never asked.
    socket: Mutex<Option<RawFd>>,
    traffic: Traffic,
}

/// What the connection's socket has carried, counted by `CountedStream`: the bytes written,
/// and how many had been written when bytes last came in. A request whose bytes all came
/// in after every earlier answer was written was sent by a client that had those answers;
/// one that came in before (pipelined) was sent without them.
/// And whether the socket failed while the connection read or wrote it: a reset that
/// came while the connection waited for its next request ends it as if the client had
/// closed (hyper reads the error, the socket forgets it), yet the client's side dropped
/// the answers it had not read.
#[derive(Default)]
struct Traffic {
    written: AtomicU64,
    written_before_last_read: AtomicU64,
    failed: AtomicBool,
}

tokio::task_local! {
    /// The connection a request came on: methods register their answers with it without
    /// every layer between the route and the method carrying it.
    static CONNECTION: Arc<ConnectionDeliveries>;
}

/// How long, once a connection ends, its client's TCP stack has to acknowledge the last
/// answer before it is sent again.
const ACKNOWLEDGE_WITHIN: Duration = Duration::from_secs(2);
const ACKNOWLEDGE_AT_MOST: Duration = Duration::from_secs(30);

impl ConnectionDeliveries {
    pub fn new() -> Arc<Self> {
        Arc::default()
    }

    /// Runs a request's handler with this connection as the one its answers go out on.
    pub fn scope<F: Future>(self: &Arc<Self>, handler: F) -> impl Future<Output = F::Output> {
        CONNECTION.scope(self.clone(), handler)
    }

    /// A new request on the connection: when it came in after every earlier answer was
    /// written, its client has read them (an HTTP/1.1 client reads an answer before it
    /// sends the next request). When it came in before (pipelined behind a waiting poll),
    /// nothing is known yet: a later request, or how the connection ends, settles them.
    pub fn request_arrived(&self) {
        let written = self.traffic.written.load(Ordering::Acquire);
        if self
            .traffic
            .written_before_last_read
            .load(Ordering::Acquire)
            == written
        {
            self.received_all();
        }
    }

    /// The connection's stream, counted for `request_arrived`.
    pub fn counted(self: &Arc<Self>, stream: TcpStream) -> CountedStream {
        CountedStream {
            stream,
            deliveries: self.clone(),
        }
    }

    /// Every earlier answer on the connection reached its client.
    fn received_all(&self) {
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

    /// The connection's socket, open until `settle` (or `SocketKept`'s drop) lets it go.
    pub fn keep_socket(self: &Arc<Self>, stream: &TcpStream) -> SocketKept {
        *lock(&self.socket) = Some(stream.as_raw_fd());
        SocketKept(self.clone())
    }

    /// Whether the client's TCP stack acknowledged everything sent on this connection, as
    /// `acknowledged` says; None once the connection is closed.
    pub fn acknowledged_now(&self) -> Option<bool> {
        let socket = lock(&self.socket);
        let fd = (*socket)?;
        // SAFETY: the descriptor is open while it is in `socket`, which is cleared under
        // this lock before it closes (see `SocketKept`).
        let stream = std::mem::ManuallyDrop::new(unsafe { std::net::TcpStream::from_raw_fd(fd) });
        acknowledged_socket(&stream)
    }

    pub fn has_pending(&self) -> bool {
        !self.lock().is_empty()
    }

    /// Settles the answers still pending when the connection has ended (`failed`: on an
    /// error of the socket), by what the client's TCP stack does with them: it acknowledged
    /// every byte and then closed its side, or keeps it open (received); or it answered
    /// with a reset, because the client closed before reading (lost).
    pub async fn settle(&self, mut stream: TcpStream, failed: bool) {
        self.settle_pending(&mut stream, failed).await;
        *lock(&self.socket) = None;
        drop(stream);
    }

    async fn settle_pending(&self, stream: &mut TcpStream, failed: bool) {
        if !self.has_pending() {
            return;
        }
        if failed || self.traffic.failed.load(Ordering::Acquire) {
            return self.lost_all();
        }
        // Our end first, so a client reading to the end of the answer is not kept waiting.
        let _ = tokio::io::AsyncWriteExt::shutdown(stream).await;
        // A slow link: while the client keeps acknowledging, it keeps receiving; the wait
        // starts again with each progress, up to `ACKNOWLEDGE_AT_MOST` in all.
        let started = tokio::time::Instant::now();
        let mut deadline = started + ACKNOWLEDGE_WITHIN;
        let mut queued = queued_bytes(stream);
        loop {
            let closed = match stream.try_read(&mut [0; 512]) {
                Ok(0) => true,
                Ok(_) => false,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => false,
                Err(_) => return self.lost_all(),
            };
            let acknowledged = match acknowledged(stream) {
                Some(acknowledged) => acknowledged,
                None => return self.lost_all(),
            };
            if acknowledged && closed {
                return self.received_all();
            }
            let now = tokio::time::Instant::now();
            let left = queued_bytes(stream);
            if left < queued {
                queued = left;
                deadline = (now + ACKNOWLEDGE_WITHIN).min(started + ACKNOWLEDGE_AT_MOST);
            }
            if now >= deadline {
                return if acknowledged {
                    self.received_all()
                } else {
                    self.lost_all()
                };
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    fn take(&self) -> Vec<(Weak<dyn Answers>, u64)> {
        std::mem::take(&mut *self.lock())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(Weak<dyn Answers>, u64)>> {
        lock(&self.pending)
    }
}

/// A connection's socket, counting what it carries (`Traffic`).
pub struct CountedStream {
    stream: TcpStream,
    deliveries: Arc<ConnectionDeliveries>,
}

impl CountedStream {
    pub fn into_inner(self) -> TcpStream {
        self.stream
    }

    fn wrote(&self, written: Poll<std::io::Result<usize>>) -> Poll<std::io::Result<usize>> {
        let traffic = &self.deliveries.traffic;
        match &written {
            Poll::Ready(Ok(n)) => {
                traffic.written.fetch_add(*n as u64, Ordering::AcqRel);
            }
            Poll::Ready(Err(_)) => traffic.failed.store(true, Ordering::Release),
            Poll::Pending => {}
        }
        written
    }
}

impl AsyncRead for CountedStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let read = Pin::new(&mut this.stream).poll_read(cx, buf);
        let traffic = &this.deliveries.traffic;
        match &read {
            Poll::Ready(Ok(())) if buf.filled().len() > before => {
                let written = traffic.written.load(Ordering::Acquire);
                traffic
                    .written_before_last_read
                    .store(written, Ordering::Release);
            }
            Poll::Ready(Err(_)) => traffic.failed.store(true, Ordering::Release),
            _ => {}
        }
        read
    }
}

impl AsyncWrite for CountedStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let written = Pin::new(&mut this.stream).poll_write(cx, buf);
        this.wrote(written)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let written = Pin::new(&mut this.stream).poll_write_vectored(cx, bufs);
        this.wrote(written)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

/// Keeps a connection's socket askable (`acknowledged_now`) until dropped: declared after
/// the connection that owns the socket, so that it drops first however the task ends.
pub struct SocketKept(Arc<ConnectionDeliveries>);

impl Drop for SocketKept {
    fn drop(&mut self) {
        *lock(&self.0.socket) = None;
    }
}

/// The connection the current request came on (None outside one).
pub fn current_connection() -> Option<Arc<ConnectionDeliveries>> {
    CONNECTION.try_with(|c| c.clone()).ok()
}

/// Registers a legacy answer (`token`, from the session) with the connection it goes out
/// on. Outside a connection (a method called directly) it counts as received at once.
pub fn register<S: Answers + 'static>(session: &Arc<S>, token: u64) {
    let registered = CONNECTION.try_with(|connection| {
        let weak: Weak<dyn Answers> = Arc::downgrade(session) as Weak<dyn Answers>;
        connection.lock().push((weak, token));
    });
    if registered.is_err() {
        session.answer_received(token);
    }
}

/// Bytes sent on `socket` and not yet acknowledged (or not yet sent); u32::MAX when the
/// socket cannot tell.
#[cfg(target_os = "linux")]
fn queued_bytes(socket: &impl AsRawFd) -> u32 {
    let mut queued: libc::c_int = 0;
    // SAFETY: the descriptor is an open TCP socket while `socket` lives, and TIOCOUTQ
    // writes one c_int.
    let counted = unsafe { libc::ioctl(socket.as_raw_fd(), libc::TIOCOUTQ, &mut queued) };
    if counted == 0 {
        queued.max(0) as u32
    } else {
        u32::MAX
    }
}

/// The TCP state of `socket` (`tcpi_state`: 1 established ... 7 closed), None when the
/// socket cannot tell.
#[cfg(target_os = "linux")]
fn tcp_state(socket: &impl AsRawFd) -> Option<u8> {
    // SAFETY: the descriptor is an open TCP socket while `socket` lives, and the buffer
    // and its length are TCP_INFO's.
    unsafe {
        let mut info: libc::tcp_info = std::mem::zeroed();
        let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
        let got = libc::getsockopt(
            socket.as_raw_fd(),
            libc::SOL_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        );
        (got == 0).then_some(info.tcpi_state)
    }
}

#[cfg(not(target_os = "linux"))]
fn queued_bytes(_socket: &impl AsRawFd) -> u32 {
    0
}

#[cfg(not(target_os = "linux"))]
fn tcp_state(_socket: &impl AsRawFd) -> Option<u8> {
    Some(1)
}

/// Whether the peer acknowledged every byte sent on `stream`: Some(true) yes, Some(false)
/// not yet, None never (the connection was reset, or the socket cannot tell). A reset
/// also empties the send queue, so it is looked for first.
fn acknowledged(stream: &TcpStream) -> Option<bool> {
    if let Ok(Some(_)) | Err(_) = stream.take_error() {
        return None;
    }
    match queued_bytes(stream) {
        u32::MAX => None,
        queued => Some(queued == 0),
    }
}

/// `acknowledged` for a socket another task reads and writes: whether a reset came is
/// asked without taking the socket's pending error (its owner reads that).
fn acknowledged_socket(stream: &std::net::TcpStream) -> Option<bool> {
    const TCP_CLOSE: u8 = 7;
    if tcp_state(stream)? == TCP_CLOSE {
        return None;
    }
    match queued_bytes(stream) {
        u32::MAX => None,
        queued => Some(queued == 0),
    }
}
