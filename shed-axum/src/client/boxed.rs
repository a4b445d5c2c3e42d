//! Boxing a [`ReplayBody`] into the body types of the clients that take
//! only their own: tonic's `Channel` takes `tonic::body::Body`.

use http_body::Body;
use tower::BoxError;

use super::ReplayBody;

#[cfg(feature = "tonic")]
impl<B> From<ReplayBody<B>> for tonic::body::Body
where
    B: Body + Send + 'static,
    B::Error: Into<BoxError>,
{
    fn from(body: ReplayBody<B>) -> Self {
        tonic::body::Body::new(body)
    }
}

#[cfg(feature = "axum")]
impl<B> From<ReplayBody<B>> for axum::body::Body
where
    B: Body + Send + 'static,
    B::Error: Into<BoxError>,
{
    fn from(body: ReplayBody<B>) -> Self {
        axum::body::Body::new(body)
    }
}
