//! A request body that records what it sends, up to a byte budget, so the
//! request can be sent again.

use std::error::Error;
use std::fmt;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

use bytes::{Buf, Bytes};
use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};
use tower::BoxError;

use super::ReplayableBody;

/// A request body that records the frames it sends, up to `max_bytes` of
/// data, so that a [`replay`](ReplayableBody::replay) of it sends the same
/// bytes again: the recorded frames first, then, if the original was not
/// read to its end, the rest of it (recorded in turn).
///
/// Recording is lazy: nothing is read ahead or buffered before the client
/// asks for it, so a streaming body streams. Once the recorded data would
/// exceed `max_bytes`, what was recorded is dropped and recording stops:
/// the body that is reading goes on sending, but the request can no longer
/// be sent again ([`can_replay`](ReplayableBody::can_replay) is `false`, and
/// [`ShedRetryPolicy`](super::ShedRetryPolicy) stops with
/// [`Reason::BodyTooLarge`](shed_core::retry::Reason::BodyTooLarge)).
/// Memory is bounded by `max_bytes` per request, plus one frame.
///
/// Only one of a request's bodies reads the original at a time: a replay
/// that has caught up with the recording while an earlier attempt's body
/// still holds the original waits until that body ends or is dropped.
///
/// Made by [`ShedRetryLayer::replay_buffer`](super::ShedRetryLayer::replay_buffer)
/// for each request; its errors are boxed ([`tower::BoxError`]).
///
/// ```
/// use http_body_util::BodyExt;
/// use shed_axum::client::{ReplayBody, ReplayableBody};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), tower::BoxError> {
/// let original = ReplayBody::new(String::from("hello, world"), 1024);
/// let replay = original.replay(); // taken before the original is sent
///
/// assert_eq!(original.collect().await?.to_bytes(), "hello, world");
/// assert!(replay.can_replay());
/// assert_eq!(replay.collect().await?.to_bytes(), "hello, world");
///
/// let too_large = ReplayBody::new(String::from("hello, world"), 5);
/// let replay = too_large.replay();
/// assert_eq!(too_large.collect().await?.to_bytes(), "hello, world", "sent all the same");
/// assert!(!replay.can_replay());
/// # Ok(())
/// # }
/// ```
pub struct ReplayBody<B> {
    tape: Arc<Mutex<Tape<B>>>,
    /// The index of the next recorded frame this body sends.
    next: usize,
    /// The original, while this body is the one reading it.
    reading: Option<Pin<Box<B>>>,
    /// Data bytes sent by this body, for its size hint.
    sent: u64,
    /// Whether this body has sent the recorded trailers.
    sent_trailers: bool,
}

/// What polling a body for its next frame gives.
type NextFrame = Option<Result<Frame<Bytes>, BoxError>>;

/// What the bodies of one request share.
struct Tape<B> {
    /// The data frames read from the original, in order, while within the
    /// budget; emptied when the budget is exceeded.
    frames: Vec<Bytes>,
    /// How many data frames have been read from the original.
    frames_read: usize,
    /// Data bytes recorded.
    recorded: usize,
    max_bytes: usize,
    overflowed: bool,
    trailers: Option<HeaderMap>,
    original: Original<B>,
    size_hint: SizeHint,
    /// Bodies waiting for the original to be put back.
    waiting: Vec<Waker>,
}

/// Where the original body is.
enum Original<B> {
    /// Put back by the last body that read it: the next one may take it.
    Idle(Pin<Box<B>>),
    /// Being read by one of the bodies.
    Taken,
    /// Read to its end: everything is recorded (or was, within the budget).
    Ended,
    /// It failed; what it did not send is lost.
    Failed,
}

impl<B: Body> ReplayBody<B> {
    /// Wraps `body`, recording up to `max_bytes` of its data.
    pub fn new(body: B, max_bytes: usize) -> Self {
        let size_hint = body.size_hint();
        let original = if body.is_end_stream() {
            Original::Ended
        } else {
            Original::Idle(Box::pin(body))
        };
        let tape = Tape {
            frames: Vec::new(),
            frames_read: 0,
            recorded: 0,
            max_bytes,
            overflowed: false,
            trailers: None,
            original,
            size_hint,
            waiting: Vec::new(),
        };
        Self::on(Arc::new(Mutex::new(tape)))
    }
}

impl<B> ReplayBody<B> {
    fn on(tape: Arc<Mutex<Tape<B>>>) -> Self {
        Self {
            tape,
            next: 0,
            reading: None,
            sent: 0,
            sent_trailers: false,
        }
    }

    /// Sends what the tape holds for this body, or takes the original to
    /// read on; `None` when this body now reads the original.
    fn play_tape(&mut self, cx: &mut Context<'_>) -> Option<Poll<NextFrame>> {
        let mut tape = lock(&self.tape);
        if self.next < tape.frames_read {
            if tape.overflowed {
                return Some(Poll::Ready(Some(Err(ReplayError::TooLarge.into()))));
            }
            let data = tape.frames[self.next].clone();
            self.next += 1;
            self.sent += data.len() as u64;
            return Some(Poll::Ready(Some(Ok(Frame::data(data)))));
        }
        match std::mem::replace(&mut tape.original, Original::Taken) {
            Original::Idle(original) => {
                self.reading = Some(original);
                None
            }
            Original::Taken => {
                if !tape.waiting.iter().any(|waker| waker.will_wake(cx.waker())) {
                    tape.waiting.push(cx.waker().clone());
                }
                Some(Poll::Pending)
            }
            Original::Ended => {
                tape.original = Original::Ended;
                let trailers = tape.trailers.clone().filter(|_| !self.sent_trailers);
                self.sent_trailers = true;
                Some(Poll::Ready(
                    trailers.map(|trailers| Ok(Frame::trailers(trailers))),
                ))
            }
            Original::Failed => {
                tape.original = Original::Failed;
                Some(Poll::Ready(Some(Err(ReplayError::OriginalFailed.into()))))
            }
        }
    }

    /// Puts the original back (or records how it ended) and wakes the
    /// bodies waiting for it.
    fn put_back(&mut self, original: Original<B>) {
        let waiting = {
            let mut tape = lock(&self.tape);
            tape.original = original;
            std::mem::take(&mut tape.waiting)
        };
        waiting.into_iter().for_each(Waker::wake);
    }
}

impl<B> ReplayBody<B>
where
    B: Body,
    B::Error: Into<BoxError>,
{
    /// Reads the next frame of the original and records it.
    fn read_original(&mut self, cx: &mut Context<'_>) -> Poll<NextFrame> {
        let original = self.reading.as_mut().expect("called while reading");
        let frame = match std::task::ready!(original.as_mut().poll_frame(cx)) {
            Some(Ok(frame)) => frame,
            Some(Err(error)) => {
                self.reading = None;
                self.put_back(Original::Failed);
                return Poll::Ready(Some(Err(error.into())));
            }
            None => {
                self.reading = None;
                self.put_back(Original::Ended);
                return Poll::Ready(None);
            }
        };
        let frame = match frame.into_data() {
            Ok(mut data) => {
                let data = data.copy_to_bytes(data.remaining());
                self.record(&data);
                self.sent += data.len() as u64;
                Frame::data(data)
            }
            Err(frame) => match frame.into_trailers() {
                Ok(trailers) => {
                    // Trailers end a body.
                    lock(&self.tape).trailers = Some(trailers.clone());
                    self.sent_trailers = true;
                    self.reading = None;
                    self.put_back(Original::Ended);
                    Frame::trailers(trailers)
                }
                // A kind of frame http-body does not have yet: sent, not kept.
                Err(frame) => frame.map_data(|mut data| data.copy_to_bytes(data.remaining())),
            },
        };
        Poll::Ready(Some(Ok(frame)))
    }

    fn record(&mut self, data: &Bytes) {
        let waiting = {
            let mut tape = lock(&self.tape);
            tape.frames_read += 1;
            self.next = tape.frames_read;
            if !tape.overflowed {
                if tape.recorded + data.len() > tape.max_bytes {
                    tape.overflowed = true;
                    tape.frames = Vec::new();
                } else {
                    tape.recorded += data.len();
                    tape.frames.push(data.clone());
                }
            }
            std::mem::take(&mut tape.waiting)
        };
        waiting.into_iter().for_each(Waker::wake);
    }
}

impl<B> Body for ReplayBody<B>
where
    B: Body,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.get_mut();
        if this.reading.is_none() {
            if let Some(poll) = this.play_tape(cx) {
                return poll;
            }
        }
        this.read_original(cx)
    }

    fn is_end_stream(&self) -> bool {
        if self.reading.is_some() {
            return false;
        }
        let tape = lock(&self.tape);
        matches!(tape.original, Original::Ended)
            && self.next == tape.frames_read
            && (tape.trailers.is_none() || self.sent_trailers)
    }

    fn size_hint(&self) -> SizeHint {
        let whole = lock(&self.tape).size_hint;
        let mut rest = SizeHint::new();
        rest.set_lower(whole.lower().saturating_sub(self.sent));
        if let Some(upper) = whole.upper() {
            rest.set_upper(upper.saturating_sub(self.sent));
        }
        rest
    }
}

impl<B> ReplayableBody for ReplayBody<B> {
    /// A body on the same tape, from its start.
    fn replay(&self) -> Self {
        Self::on(Arc::clone(&self.tape))
    }

    fn can_replay(&self) -> bool {
        !lock(&self.tape).overflowed
    }
}

impl<B> Drop for ReplayBody<B> {
    fn drop(&mut self) {
        if let Some(original) = self.reading.take() {
            // Dropped mid-read (the attempt ended first): the next replay
            // goes on from here.
            self.put_back(Original::Idle(original));
        }
    }
}

impl<B> fmt::Debug for ReplayBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tape = lock(&self.tape);
        f.debug_struct("ReplayBody")
            .field("next", &self.next)
            .field("reading", &self.reading.is_some())
            .field("recorded", &tape.recorded)
            .field("max_bytes", &tape.max_bytes)
            .field("overflowed", &tape.overflowed)
            .finish_non_exhaustive()
    }
}

/// Locks a tape. A panic while the lock was held left it whole: each update
/// is a single assignment or push.
fn lock<B>(tape: &Mutex<Tape<B>>) -> MutexGuard<'_, Tape<B>> {
    tape.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Why a replay could not send the original's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReplayError {
    /// The frames it needs were dropped when the budget was exceeded.
    TooLarge,
    /// The original failed before sending what the replay needs.
    OriginalFailed,
}

impl fmt::Display for ReplayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::TooLarge => "request body outgrew its replay buffer; it cannot be sent again",
            Self::OriginalFailed => "request body failed while first sent; it cannot be sent again",
        })
    }
}

impl Error for ReplayError {}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt, StreamBody};
    use std::sync::atomic::{AtomicBool, Ordering};

    type Frames =
        StreamBody<tokio_stream::Iter<std::vec::IntoIter<Result<Frame<Bytes>, BoxError>>>>;

    /// A streaming body of `chunks`, then `trailers` if given.
    fn streaming(chunks: &[&'static str], trailers: Option<HeaderMap>) -> Frames {
        let mut frames: Vec<Result<Frame<Bytes>, BoxError>> = chunks
            .iter()
            .map(|chunk| Ok(Frame::data(Bytes::from_static(chunk.as_bytes()))))
            .collect();
        frames.extend(trailers.map(|trailers| Ok(Frame::trailers(trailers))));
        StreamBody::new(tokio_stream::iter(frames))
    }

    async fn next_data<B>(body: &mut ReplayBody<B>) -> Bytes
    where
        B: Body + Unpin,
        B::Error: Into<BoxError>,
    {
        let frame = body.frame().await.expect("a frame").expect("no error");
        frame.into_data().expect("a data frame")
    }

    #[tokio::test]
    async fn a_replay_sends_a_streamed_body_byte_for_byte() {
        let original = ReplayBody::new(streaming(&["one ", "two ", "three"], None), 64);
        let replay = original.replay();
        let sent = original.collect().await.unwrap().to_bytes();
        assert_eq!(sent, "one two three");
        assert_eq!(replay.collect().await.unwrap().to_bytes(), sent);
    }

    #[tokio::test]
    async fn a_replay_goes_on_from_where_the_original_was_left() {
        let mut original = ReplayBody::new(streaming(&["one ", "two ", "three"], None), 64);
        let replay = original.replay();
        assert_eq!(next_data(&mut original).await, "one ");
        drop(original); // the attempt ended before its body was sent
        assert_eq!(replay.collect().await.unwrap().to_bytes(), "one two three");
    }

    #[tokio::test]
    async fn every_replay_sends_the_whole_body() {
        let original = ReplayBody::new(streaming(&["a", "b"], None), 64);
        let first = original.replay();
        let second = first.replay();
        drop(original);
        assert_eq!(first.collect().await.unwrap().to_bytes(), "ab");
        assert_eq!(second.collect().await.unwrap().to_bytes(), "ab");
    }

    #[tokio::test]
    async fn trailers_are_replayed() {
        let mut trailers = HeaderMap::new();
        trailers.insert("checksum", http::HeaderValue::from_static("abc"));
        let original = ReplayBody::new(streaming(&["data"], Some(trailers.clone())), 64);
        let replay = original.replay();
        let sent = original.collect().await.unwrap();
        assert_eq!(sent.trailers(), Some(&trailers));
        let replayed = replay.collect().await.unwrap();
        assert_eq!(replayed.trailers(), Some(&trailers));
        assert_eq!(replayed.to_bytes(), "data");
    }

    #[tokio::test]
    async fn a_body_within_the_budget_can_be_replayed() {
        let original = ReplayBody::new(streaming(&["12345", "67890"], None), 10);
        let replay = original.replay();
        original.collect().await.unwrap();
        assert!(replay.can_replay());
    }

    #[tokio::test]
    async fn a_body_over_the_budget_is_sent_whole_but_cannot_be_replayed() {
        let original = ReplayBody::new(streaming(&["12345", "67890", "!"], None), 10);
        let replay = original.replay();
        assert_eq!(original.collect().await.unwrap().to_bytes(), "1234567890!");
        assert!(!replay.can_replay());
        let error = replay.collect().await.unwrap_err();
        assert!(error.to_string().contains("replay buffer"), "{error}");
    }

    #[tokio::test]
    async fn a_replay_that_reads_on_may_outgrow_the_budget_and_still_send() {
        let mut original = ReplayBody::new(streaming(&["12345", "67890", "!"], None), 10);
        let replay = original.replay();
        assert_eq!(next_data(&mut original).await, "12345");
        drop(original);
        let next = replay.replay();
        assert_eq!(replay.collect().await.unwrap().to_bytes(), "1234567890!");
        assert!(!next.can_replay());
    }

    #[tokio::test]
    async fn an_empty_body_ends_at_once_and_replays() {
        let original = ReplayBody::new(String::new(), 0);
        assert!(original.is_end_stream());
        assert!(original.replay().is_end_stream());
        assert!(original.can_replay());
    }

    #[tokio::test]
    async fn the_size_hint_is_the_originals_less_what_was_sent() {
        let mut original = ReplayBody::new(http_body_util::Full::new(Bytes::from("12345")), 64);
        assert_eq!(original.size_hint().exact(), Some(5));
        let replay = original.replay();
        next_data(&mut original).await;
        assert_eq!(original.size_hint().exact(), Some(0));
        assert_eq!(replay.size_hint().exact(), Some(5));
    }

    #[tokio::test]
    async fn a_replay_waits_while_an_earlier_attempt_reads_the_original() {
        let mut original = ReplayBody::new(streaming(&["one ", "two"], None), 64);
        let mut replay = original.replay();
        assert_eq!(next_data(&mut original).await, "one ");
        assert_eq!(next_data(&mut replay).await, "one ");
        let woken = Arc::new(Woken::default());
        let waker = Waker::from(Arc::clone(&woken));
        let mut cx = Context::from_waker(&waker);
        assert!(Pin::new(&mut replay).poll_frame(&mut cx).is_pending());
        assert!(!woken.0.load(Ordering::Relaxed));
        drop(original);
        assert!(
            woken.0.load(Ordering::Relaxed),
            "woken when the original is put back"
        );
        assert_eq!(next_data(&mut replay).await, "two");
    }

    #[derive(Default)]
    struct Woken(AtomicBool);

    impl std::task::Wake for Woken {
        fn wake(self: Arc<Self>) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
}
