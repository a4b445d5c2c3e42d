//! The response body: the inner body holding its permit, or a rejection's bytes.

use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

use crate::client::TrailerReader;
use crate::feedback::LoadFeedback;
use crate::held::HeldPermit;

pin_project! {
    /// The body of every response that passes through [`Shed`](crate::Shed).
    ///
    /// For a served request it is the inner body, holding the request's permit
    /// until the body ends, fails or is dropped, so a streaming response counts
    /// against the concurrency limit for as long as it streams (a body dropped
    /// before its end, by a client that hung up, gives the slot back as
    /// abandoned). For a refused request it is the rejection's small, complete
    /// body. With [load feedback](crate::ShedLayer::load_feedback), a gRPC
    /// call's trailers gain `shed-load` as they pass.
    pub struct ShedBody<B> {
        #[pin]
        kind: Kind<B>,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<B> {
        Inner {
            #[pin]
            body: B,
            permit: Option<HeldPermit>,
            // What to do with the trailers as they pass, if anything.
            trailer: Option<TrailerHook>,
        },
        Full {
            data: Option<Bytes>,
        },
    }
}

impl<B> ShedBody<B> {
    pub(crate) fn inner(body: B, permit: Option<HeldPermit>, trailer: Option<TrailerHook>) -> Self
    where
        B: Body,
    {
        // A body that is already over may never be polled.
        let permit = match permit {
            Some(permit) if body.is_end_stream() => {
                permit.finish();
                None
            }
            permit => permit,
        };
        ShedBody {
            kind: Kind::Inner {
                body,
                permit,
                trailer,
            },
        }
    }

    pub(crate) fn full(data: Bytes) -> Self {
        ShedBody {
            kind: Kind::Full {
                data: (!data.is_empty()).then_some(data),
            },
        }
    }
}

/// What a [`ShedBody`] does with the trailers of the body it wraps.
pub(crate) enum TrailerHook {
    /// The server's: adds its load feedback (a gRPC call's trailers).
    Stamp(LoadFeedback),
    /// The client throttle's: reads the replica's load feedback (boxed:
    /// only gRPC calls through a throttle need it, and every body carries
    /// the hook's room).
    Read(Box<TrailerReader>),
}

impl TrailerHook {
    fn see(&self, trailers: &mut http::HeaderMap) {
        match self {
            TrailerHook::Stamp(feedback) => feedback.stamp(trailers),
            TrailerHook::Read(reader) => reader.read(trailers),
        }
    }
}

impl<B> Body for ShedBody<B>
where
    B: Body<Data = Bytes>,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        match self.project().kind.project() {
            KindProj::Inner {
                mut body,
                permit,
                trailer,
            } => {
                let mut frame = body.as_mut().poll_frame(cx);
                if let (Some(hook), Poll::Ready(Some(Ok(frame)))) = (trailer.as_ref(), &mut frame) {
                    if let Some(trailers) = frame.trailers_mut() {
                        hook.see(trailers);
                    }
                }
                let over = match &frame {
                    Poll::Ready(None | Some(Err(_))) => true,
                    Poll::Ready(Some(Ok(_))) => body.is_end_stream(),
                    Poll::Pending => false,
                };
                if over {
                    // The body is over: give the slot back now, not when
                    // hyper drops it (it may stop polling at the last frame).
                    if let Some(permit) = permit.take() {
                        permit.finish();
                    }
                }
                frame
            }
            KindProj::Full { data } => Poll::Ready(data.take().map(|data| Ok(Frame::data(data)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Inner { body, .. } => body.is_end_stream(),
            Kind::Full { data } => data.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Inner { body, .. } => body.size_hint(),
            Kind::Full { data } => {
                SizeHint::with_exact(data.as_ref().map_or(0, |d| d.len() as u64))
            }
        }
    }
}

impl<B> fmt::Debug for ShedBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            Kind::Inner { permit, .. } => f
                .debug_struct("ShedBody::Inner")
                .field("holds_permit", &permit.is_some())
                .finish_non_exhaustive(),
            Kind::Full { data } => f
                .debug_struct("ShedBody::Full")
                .field("data", data)
                .finish(),
        }
    }
}
