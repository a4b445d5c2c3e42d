//! gRPC end to end: a tonic server with `ShedLayer` in its builder, on
//! loopback, called by a tonic client. What a tonic client sees of shed's
//! answers, and what shed reads from a gRPC call.
//!
//! Real time and real sockets: the service is filled by calls held at a gate
//! (no timing), waits are bounded polls, and only end states are asserted.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use shed::{Class, GrpcOverloadStatus, Rank, RejectReason, RequestHead, ShedLayer, Shedder};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;
use tonic::metadata::MetadataValue;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Channel, Server};
use tonic::{Code, Request, Status};

use probe::{Probe, ProbeReply, ProbeRequest, EXPORT, WORK};

/// Export is batch work; everything else keeps the layer's class.
fn class_of_method(head: &RequestHead<'_>) -> Option<Class> {
    (head.uri.path() == EXPORT).then_some(Class::Batch)
}

/// A tonic server running the probe service behind a layer, and a channel to it.
struct Running {
    channel: Channel,
    /// Calls that ask to hold their slot wait here until it is closed.
    gate: Arc<Semaphore>,
}

impl Running {
    async fn start(layer: ShedLayer) -> Running {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr: SocketAddr = listener.local_addr().unwrap();
        let gate = Arc::new(Semaphore::new(0));
        let server = Server::builder()
            .layer(layer)
            .add_service(Probe::new(Arc::clone(&gate)))
            .serve_with_incoming(TcpIncoming::from(listener));
        tokio::spawn(async move { server.await.unwrap() });
        let channel = Channel::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect()
            .await
            .unwrap();
        Running { channel, gate }
    }

    async fn call(
        &self,
        method: &'static str,
        request: Request<ProbeRequest>,
    ) -> Result<ProbeReply, Status> {
        probe::call(&self.channel, method, request).await
    }

    /// Sends a call that holds its slot until [`release`](Running::release),
    /// and returns once shed has admitted it.
    async fn hold_a_slot(&self, shedder: &Shedder) -> JoinHandle<Result<ProbeReply, Status>> {
        let channel = self.channel.clone();
        let held = tokio::spawn(async move {
            probe::call(&channel, WORK, Request::new(ProbeRequest { hold: true })).await
        });
        assert!(
            settle(|| shedder.in_flight() == 1).await,
            "the held call was not admitted"
        );
        held
    }

    fn release(&self) {
        self.gate.close();
    }
}

/// Bounded polling on real time; returns whether `done` came to hold.
async fn settle(mut done: impl FnMut() -> bool) -> bool {
    for _ in 0..500 {
        if done() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    done()
}

fn work() -> Request<ProbeRequest> {
    Request::new(ProbeRequest { hold: false })
}

/// One slot and no room to wait: a held call makes the service full.
fn one_slot_no_queue() -> Shedder {
    Shedder::builder()
        .limit(1)
        .queue_capacity(0)
        .build()
        .unwrap()
}

fn pushback_ms(status: &Status) -> Option<u64> {
    status
        .metadata()
        .get("grpc-retry-pushback-ms")?
        .to_str()
        .ok()?
        .parse()
        .ok()
}

#[tokio::test]
async fn overload_is_resource_exhausted_with_a_retry_pushback() {
    let shedder = one_slot_no_queue();
    let server = Running::start(ShedLayer::new(shedder.clone())).await;
    let held = server.hold_a_slot(&shedder).await;

    let refused = server.call(WORK, work()).await.unwrap_err();

    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert!(
        pushback_ms(&refused).is_some_and(|ms| ms > 0),
        "{refused:?}"
    );
    assert_eq!(shedder.stats().class(Class::Interactive).queue_full, 1);
    server.release();
    held.await.unwrap().unwrap();
}

#[tokio::test]
async fn overload_is_unavailable_with_a_retry_pushback_when_the_layer_says_so() {
    let shedder = one_slot_no_queue();
    let layer =
        ShedLayer::new(shedder.clone()).grpc_overload_status(GrpcOverloadStatus::Unavailable);
    let server = Running::start(layer).await;
    let held = server.hold_a_slot(&shedder).await;

    let refused = server.call(WORK, work()).await.unwrap_err();

    assert_eq!(refused.code(), Code::Unavailable, "{refused:?}");
    assert!(
        pushback_ms(&refused).is_some_and(|ms| ms > 0),
        "{refused:?}"
    );
    server.release();
    held.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_deadline_too_close_to_be_met_is_deadline_exceeded() {
    // Every call needs 30 s: a caller that waits 10 s is refused at the door.
    let shedder = Shedder::builder()
        .min_useful_window(Duration::from_secs(30))
        .build()
        .unwrap();
    let server = Running::start(ShedLayer::new(shedder.clone())).await;
    let mut hurried = work();
    hurried.set_timeout(Duration::from_secs(10));

    let refused = server.call(WORK, hurried).await.unwrap_err();

    assert_eq!(refused.code(), Code::DeadlineExceeded, "{refused:?}");
    assert_eq!(
        refused.message(),
        RejectReason::DeadlineUnmeetable.description()
    );
    assert_eq!(pushback_ms(&refused), None, "no point retrying a deadline");
    assert_eq!(
        shedder.stats().class(Class::Interactive).shed_by_deadline,
        1
    );
}

#[tokio::test]
async fn a_call_with_grpc_previous_rpc_attempts_is_judged_as_a_retry() {
    // One slot and room to wait, for longer than any test waits: the
    // waiting call is neither shed nor timed out while the test watches it.
    let shedder = Shedder::builder()
        .limit(1)
        .queue_capacity(1)
        .target_sojourn(Duration::from_secs(30))
        .interval(Duration::from_secs(60))
        .max_wait(Class::Interactive, Duration::from_secs(60))
        .build()
        .unwrap();
    let server = Running::start(ShedLayer::new(shedder.clone())).await;
    let held = server.hold_a_slot(&shedder).await;
    let mut retry = work();
    retry.metadata_mut().insert(
        "grpc-previous-rpc-attempts",
        MetadataValue::from_static("1"),
    );
    let retry = tokio::spawn({
        let channel = server.channel.clone();
        async move { probe::call(&channel, WORK, retry).await }
    });

    let waits_as_a_retry = settle(|| {
        let queued = shedder.stats().queued;
        queued[Rank::retry(Class::Interactive).index()] == 1
            && queued[Rank::original(Class::Interactive).index()] == 0
    })
    .await;
    server.release();

    assert!(waits_as_a_retry, "{:?}", shedder.stats().queued);
    held.await.unwrap().unwrap();
    let served = retry.await.unwrap().unwrap();
    assert_eq!((served.class.as_str(), served.attempt), ("interactive", 2));
}

#[tokio::test]
async fn each_method_is_judged_at_the_class_the_classifier_gives_its_path() {
    let shedder = Shedder::with_limit(4).unwrap();
    let server = Running::start(ShedLayer::new(shedder.clone()).classifier(class_of_method)).await;

    let work = server.call(WORK, work()).await.unwrap();
    let export = server
        .call(EXPORT, Request::new(ProbeRequest { hold: false }))
        .await
        .unwrap();

    assert_eq!(work.class, "interactive");
    assert_eq!(export.class, "batch");
    let stats = shedder.stats();
    assert_eq!(stats.class(Class::Interactive).admitted, 1);
    assert_eq!(stats.class(Class::Batch).admitted, 1);
}

/// `test.v1.Probe`, declared by hand: two unary methods answering with the
/// class and attempt shed admitted the call at.
mod probe {
    use std::convert::Infallible;
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::Arc;
    use std::task::{Context, Poll};

    use http::uri::PathAndQuery;
    use prost::Message;
    use shed::Admitted;
    use tokio::sync::Semaphore;
    use tonic::body::Body;
    use tonic::server::NamedService;
    use tonic::transport::Channel;
    use tonic::{Request, Response, Status};
    use tonic_prost::ProstCodec;
    use tower::{service_fn, Service};

    pub const WORK: &str = "/test.v1.Probe/Work";
    pub const EXPORT: &str = "/test.v1.Probe/Export";

    #[derive(Clone, PartialEq, Message)]
    pub struct ProbeRequest {
        /// Hold the slot until the server's gate closes.
        #[prost(bool, tag = "1")]
        pub hold: bool,
    }

    #[derive(Clone, PartialEq, Message)]
    pub struct ProbeReply {
        #[prost(string, tag = "1")]
        pub class: String,
        #[prost(uint32, tag = "2")]
        pub attempt: u32,
    }

    #[derive(Clone)]
    pub struct Probe {
        gate: Arc<Semaphore>,
    }

    impl Probe {
        pub fn new(gate: Arc<Semaphore>) -> Probe {
            Probe { gate }
        }

        async fn answer(
            &self,
            request: Request<ProbeRequest>,
        ) -> Result<Response<ProbeReply>, Status> {
            let admitted = *request
                .extensions()
                .get::<Admitted>()
                .ok_or_else(|| Status::internal("served without a shed layer"))?;
            if request.get_ref().hold {
                let _ = self.gate.acquire().await;
            }
            Ok(Response::new(ProbeReply {
                class: admitted.class.to_string(),
                attempt: admitted.attempt,
            }))
        }
    }

    impl NamedService for Probe {
        const NAME: &'static str = "test.v1.Probe";
    }

    impl Service<http::Request<Body>> for Probe {
        type Response = http::Response<Body>;
        type Error = Infallible;
        type Future =
            Pin<Box<dyn Future<Output = Result<http::Response<Body>, Infallible>> + Send>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, request: http::Request<Body>) -> Self::Future {
            let probe = self.clone();
            Box::pin(async move {
                Ok(match request.uri().path() {
                    WORK | EXPORT => {
                        let method = service_fn(|call| probe.answer(call));
                        tonic::server::Grpc::new(ProstCodec::default())
                            .unary(method, request)
                            .await
                    }
                    _ => Status::unimplemented("no such method").into_http(),
                })
            })
        }
    }

    /// Calls the method at `path` on `channel`.
    pub async fn call(
        channel: &Channel,
        path: &'static str,
        request: Request<ProbeRequest>,
    ) -> Result<ProbeReply, Status> {
        let mut grpc = tonic::client::Grpc::new(channel.clone());
        grpc.ready()
            .await
            .map_err(|error| Status::unavailable(error.to_string()))?;
        let reply = grpc
            .unary(
                request,
                PathAndQuery::from_static(path),
                ProstCodec::default(),
            )
            .await?;
        Ok(reply.into_inner())
    }
}
