//! Helpers shared by the shed-axum integration tests.
#![allow(dead_code)]

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use http::{Request, Response};
use http_body::Frame;
use http_body_util::BodyExt;
use shed_axum::TokioClock;
use shed_core::{Arrival, Class, Permit, Shedder};
use tokio::sync::mpsc;

/// A shedder on tokio's clock, so paused test time drives it.
pub fn shedder(limit: usize) -> Shedder {
    Shedder::builder()
        .limit(limit)
        .clock(TokioClock)
        .build()
        .unwrap()
}

/// A shedder whose only slot is taken and where nobody may wait: every
/// request through it is refused for overload while the permit lives.
pub fn full_shedder() -> (Shedder, Permit) {
    let shedder = Shedder::builder()
        .limit(1)
        .queue_capacity(0)
        .clock(TokioClock)
        .build()
        .unwrap();
    let busy = hold_slot(&shedder);
    (shedder, busy)
}

/// Takes one slot of `shedder` directly, as a long request would.
pub fn hold_slot(shedder: &Shedder) -> Permit {
    shedder
        .try_admit(&Arrival::new(Class::Critical))
        .expect("a free slot")
}

pub fn get(uri: &str) -> Request<Body> {
    Request::get(uri).body(Body::empty()).unwrap()
}

pub fn get_with(uri: &str, headers: &[(&str, &str)]) -> Request<Body> {
    let mut builder = Request::get(uri);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    builder.body(Body::empty()).unwrap()
}

pub fn grpc(uri: &str, headers: &[(&str, &str)]) -> Request<Body> {
    let mut builder = Request::post(uri)
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    builder.body(Body::empty()).unwrap()
}

pub async fn text(response: Response<Body>) -> String {
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(bytes.to_vec()).unwrap()
}

pub async fn json(response: Response<Body>) -> serde_json::Value {
    serde_json::from_str(&text(response).await).unwrap()
}

/// The whole seconds of a `Retry-After` header.
pub fn retry_after_secs<B>(response: &Response<B>) -> u64 {
    response.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap()
}

/// Lets other tasks run until `done` holds, a bounded number of times;
/// returns whether it held. Never depends on how long anything takes.
pub async fn settle(mut done: impl FnMut() -> bool) -> bool {
    for _ in 0..10_000 {
        if done() {
            return true;
        }
        tokio::task::yield_now().await;
    }
    done()
}

/// Like [`settle`], for tests on real sockets and real time: short sleeps,
/// a bounded number of them. The end state is asserted, not the time.
pub async fn settle_real(mut done: impl FnMut() -> bool) -> bool {
    for _ in 0..500 {
        if done() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    done()
}

/// A response body fed by the test: each `Bytes` sent is one frame; it ends
/// when the sender is dropped.
pub struct ChannelBody(pub mpsc::Receiver<Bytes>);

impl http_body::Body for ChannelBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        self.0
            .poll_recv(cx)
            .map(|chunk| chunk.map(|data| Ok(Frame::data(data))))
    }
}

/// A body that sends one chunk and then never ends.
pub fn endless_body() -> Body {
    Body::new(Endless { sent: false })
}

struct Endless {
    sent: bool,
}

impl http_body::Body for Endless {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if std::mem::replace(&mut self.sent, true) {
            Poll::Pending
        } else {
            Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"first chunk\n")))))
        }
    }
}

/// Sets a flag when dropped: proof that a handler's future was dropped.
pub struct DropFlag(pub std::sync::Arc<std::sync::atomic::AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// A GET handler that never finishes and sets `dropped` when its future is
/// dropped: proof that shed (or hyper) cancelled it.
pub fn endless_handler(
    dropped: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> axum::routing::MethodRouter {
    axum::routing::get(move || {
        let guard = DropFlag(dropped.clone());
        async move {
            let _guard = guard;
            std::future::pending::<()>().await;
        }
    })
}

/// Keeps a second dispatcher registered for the rest of the process, so a
/// scoped capture cannot miss an event to another test thread.
///
/// `tracing` caches whether a callsite is wanted, once per process, when the
/// first thread reaches it. With one dispatcher registered that answer is
/// taken from the reaching thread's default only: a test thread with no
/// subscriber would cache "never" and silence the callsite for the thread
/// that is capturing. With two or more registered, every registered
/// dispatcher is asked, the capturing one included.
fn keep_two_dispatchers_registered() {
    static PIN: std::sync::OnceLock<tracing::Dispatch> = std::sync::OnceLock::new();
    PIN.get_or_init(|| tracing::Dispatch::new(tracing::subscriber::NoSubscriber::default()));
}

/// What `tracing` wrote on this thread while a [`Lines::capture`] guard
/// lived, as plain text.
#[derive(Clone, Default)]
pub struct Lines(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Lines {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Lines {
    /// Captures this thread's events at `level` and above, plain text,
    /// until the guard is dropped.
    pub fn capture(level: tracing::Level) -> (Lines, tracing::subscriber::DefaultGuard) {
        keep_two_dispatchers_registered();
        let lines = Lines::default();
        let writer = lines.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .with_max_level(level)
            .finish();
        (lines, tracing::subscriber::set_default(subscriber))
    }

    /// Everything captured so far.
    pub fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}
