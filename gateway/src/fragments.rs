//! Responses assembled from shared, already-serialized pieces: an event serialized once is
//! sent to every session that receives it without being serialized again. A small answer
//! is copied into one buffer as it is sent; a large one (a board's bits) is not copied.

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};
use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A JSON text kept as a list of pieces.
#[derive(Debug, Default, Clone)]
pub struct Fragments {
    parts: VecDeque<Bytes>,
    len: u64,
}

impl Fragments {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn push(&mut self, part: Bytes) {
        if !part.is_empty() {
            self.len += part.len() as u64;
            self.parts.push_back(part);
        }
    }

    pub fn push_static(&mut self, part: &'static str) {
        self.push(Bytes::from_static(part.as_bytes()));
    }

    pub fn append(&mut self, other: Fragments) {
        self.len += other.len;
        self.parts.extend(other.parts);
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The whole text in one buffer (for tests and small responses).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len as usize);
        for part in &self.parts {
            out.extend_from_slice(part);
        }
        out
    }
}

impl From<Bytes> for Fragments {
    fn from(part: Bytes) -> Self {
        let mut fragments = Fragments::new();
        fragments.push(part);
        fragments
    }
}

impl From<Vec<u8>> for Fragments {
    fn from(part: Vec<u8>) -> Self {
        Bytes::from(part).into()
    }
}

/// A JSON array of elements that are themselves fragments: `[e1,e2,...]`.
#[derive(Debug, Default)]
pub struct ArrayBuilder {
    body: Fragments,
    count: usize,
}

impl ArrayBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn push(&mut self, element: Fragments) {
        if self.count > 0 {
            self.body.push_static(",");
        }
        self.body.append(element);
        self.count += 1;
    }

    pub fn count(&self) -> usize {
        self.count
    }

    pub fn finish(self) -> Fragments {
        let mut out = Fragments::new();
        out.push_static("[");
        out.append(self.body);
        out.push_static("]");
        out
    }
}

/// The largest answer sent as one copied piece.
const COPY_AT_MOST: u64 = 16 * 1024;

/// An HTTP body that sends the pieces as they are (a small answer in one piece), with an
/// exact length (so that HTTP/1.0 clients, which cannot read chunked bodies, get a
/// Content-Length).
impl Body for Fragments {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        // A small answer goes out as one piece: copying a few hundred bytes costs less than
        // a frame (and a shared counter's update) per piece. Large ones, like a board's
        // bits, are not copied.
        if self.parts.len() > 1 && self.len <= COPY_AT_MOST {
            let mut whole = BytesMut::with_capacity(self.len as usize);
            for part in self.parts.drain(..) {
                whole.extend_from_slice(&part);
            }
            self.len = 0;
            return Poll::Ready(Some(Ok(Frame::data(whole.freeze()))));
        }
        match self.parts.pop_front() {
            Some(part) => {
                self.len -= part.len() as u64;
                Poll::Ready(Some(Ok(Frame::data(part))))
            }
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.parts.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn array_builder_separates_elements_with_commas() {
        let mut array = ArrayBuilder::new();
        assert_eq!(ArrayBuilder::new().finish().to_vec(), b"[]");
        array.push(Bytes::from_static(b"1").into());
        let mut two = Fragments::new();
        two.push_static("{\"a\":");
        two.push_static("2}");
        array.push(two);
        let out = array.finish();
        assert_eq!(out.to_vec(), b"[1,{\"a\":2}]");
        assert_eq!(out.len(), 11);
        assert_eq!(out.size_hint().exact(), Some(11));
    }

    /// The frames a body yields, in order.
    fn frames(mut body: Fragments) -> Vec<Bytes> {
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let mut out = Vec::new();
        while let Poll::Ready(Some(Ok(frame))) = Pin::new(&mut body).poll_frame(&mut cx) {
            out.push(frame.into_data().expect("data frames only"));
        }
        assert!(body.is_end_stream());
        out
    }

    #[test]
    fn a_small_answer_goes_out_in_one_frame() {
        let mut body = Fragments::new();
        for part in ["{\"events\":", "[", "{\"a\":1}", ",", "{\"b\":2}", "]", "}"] {
            body.push_static(part);
        }
        let whole = body.to_vec();
        let frames = frames(body);
        assert_eq!(frames.len(), 1);
        assert_eq!(frames[0].as_ref(), whole.as_slice());
    }

    #[test]
    fn a_large_answer_goes_out_piece_by_piece_uncopied() {
        let big = Bytes::from(vec![7u8; COPY_AT_MOST as usize]);
        let mut body = Fragments::new();
        body.push_static("[");
        body.push(big.clone());
        body.push_static("]");
        let frames = frames(body);
        assert_eq!(frames.len(), 3);
        // The same buffer, not a copy of it.
        assert_eq!(frames[1].as_ptr(), big.as_ptr());
        assert_eq!(
            (frames[0].as_ref(), frames[2].as_ref()),
            (&b"["[..], &b"]"[..])
        );
    }
}
