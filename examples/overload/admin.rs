//! The lab's control channel to a server in another process, over HTTP on
//! loopback: its state from `/stats`, its knobs at `/admin/...`.

use std::{net::SocketAddr, time::Duration};

use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::{
    client::legacy::{connect::HttpConnector, Client},
    rt::TokioExecutor,
};

use crate::server::ServerSample;

/// How long one control request may take.
const TIMEOUT: Duration = Duration::from_secs(2);

/// An HTTP client for one server's control routes.
#[derive(Clone)]
pub struct Admin {
    addr: SocketAddr,
    http: Client<HttpConnector, Empty<Bytes>>,
}

impl Admin {
    /// A client of the server at `addr`.
    pub fn new(addr: SocketAddr) -> Self {
        Admin {
            addr,
            http: Client::builder(TokioExecutor::new()).build(HttpConnector::new()),
        }
    }

    /// One request; the status and body, or why there is none.
    async fn call(&self, method: Method, path: &str) -> Result<(StatusCode, Bytes), String> {
        let uri = format!("http://{}{path}", self.addr);
        let request = Request::builder()
            .method(method)
            .uri(&uri)
            .body(Empty::new())
            .map_err(|e| format!("{uri}: {e}"))?;
        let exchange = async {
            let response = self
                .http
                .request(request)
                .await
                .map_err(|e| e.to_string())?;
            let status = response.status();
            let body = response
                .into_body()
                .collect()
                .await
                .map_err(|e| e.to_string())?;
            Ok::<_, String>((status, body.to_bytes()))
        };
        tokio::time::timeout(TIMEOUT, exchange)
            .await
            .map_err(|_| format!("{uri}: no answer within {TIMEOUT:?}"))?
            .map_err(|e| format!("{uri}: {e}"))
    }

    /// The server's `/stats` as JSON.
    pub async fn stats_json(&self) -> Result<serde_json::Value, String> {
        let (status, body) = self.call(Method::GET, "/stats").await?;
        if status != StatusCode::OK {
            return Err(format!("/stats answered {status}"));
        }
        serde_json::from_slice(&body).map_err(|e| format!("/stats: {e}"))
    }

    /// The server's state.
    pub async fn sample(&self) -> Result<ServerSample, String> {
        let json = self.stats_json().await?;
        ServerSample::from_json(&json).ok_or_else(|| "/stats: not the lab's JSON".into())
    }

    /// `PUT path`, expecting 204.
    async fn put(&self, path: &str) -> Result<(), String> {
        match self.call(Method::PUT, path).await? {
            (StatusCode::NO_CONTENT, _) => Ok(()),
            (status, _) => Err(format!("PUT {path} answered {status}")),
        }
    }

    /// Sets the service's slowdown.
    pub async fn set_slowdown_pct(&self, percent: u64) -> Result<(), String> {
        self.put(&format!("/admin/slowdown/{percent}")).await
    }

    /// Restarts the service-time draws from `seed`.
    pub async fn reseed(&self, seed: u64) -> Result<(), String> {
        self.put(&format!("/admin/seed/{seed}")).await
    }
}
