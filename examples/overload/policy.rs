//! The admission policies the lab compares, as written on the command line
//! (`none`, `tower@N`, `shed`, `shed@N`, with `N` a number or `true`), and
//! the layers each one puts in front of the service.

use std::{fmt, str::FromStr};

use axum::{
    error_handling::HandleErrorLayer,
    http::{header::CONTENT_TYPE, HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    routing::MethodRouter,
    BoxError, Router,
};
use shed::ShedLayer;
use shed::{ConfigError, Mode, Shedder};
use tower::{limit::GlobalConcurrencyLimitLayer, load_shed::error::Overloaded, ServiceBuilder};

use crate::{class::Class, client::Protocol, grpc};

/// A concurrency limit as a policy names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Limit {
    /// A number the user chose.
    Fixed(usize),
    /// The true concurrency of the service, found by the calibration.
    True,
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Limit::Fixed(n) => write!(f, "{n}"),
            Limit::True => f.write_str("true"),
        }
    }
}

impl FromStr for Limit {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "true" {
            return Ok(Limit::True);
        }
        match s.parse::<usize>() {
            Ok(0) => Err("a limit must be at least 1".into()),
            Ok(n) => Ok(Limit::Fixed(n)),
            Err(_) => Err(format!("limit {s:?} is neither a number nor `true`")),
        }
    }
}

/// An admission policy as the lab's tables label it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Policy {
    /// No protection: every request reaches the service.
    None,
    /// `tower@N`: the axum docs' pattern, `HandleErrorLayer` + `load_shed` +
    /// a global concurrency limit of `N`, overload answered 503.
    Tower(Limit),
    /// `shed` (`None`: `Shedder::builder().build()`, nothing set) or
    /// `shed@N` (`.limit(N)` and nothing else).
    Shed(Option<Limit>),
    /// `shadow` or `shadow@N`: the same engine as `shed` or `shed@N` in
    /// shadow mode (`.mode(Mode::Shadow)`): it serves every request and
    /// counts what it would have done.
    Shadow(Option<Limit>),
}

impl Policy {
    /// Whether building it needs the calibrated true concurrency.
    pub fn needs_true_concurrency(self) -> bool {
        matches!(
            self,
            Policy::Tower(Limit::True)
                | Policy::Shed(Some(Limit::True))
                | Policy::Shadow(Some(Limit::True))
        )
    }

    /// The policy with `true` replaced by `true_concurrency`.
    pub fn resolve(self, true_concurrency: usize) -> ServerPolicy {
        let n = |limit: Limit| match limit {
            Limit::Fixed(n) => n,
            Limit::True => true_concurrency,
        };
        match self {
            Policy::None => ServerPolicy::None,
            Policy::Tower(limit) => ServerPolicy::Tower(n(limit)),
            Policy::Shed(limit) => ServerPolicy::Shed(limit.map(n)),
            Policy::Shadow(limit) => ServerPolicy::Shadow(limit.map(n)),
        }
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            Policy::None => "none".to_owned(),
            Policy::Tower(limit) => format!("tower@{limit}"),
            Policy::Shed(None) => "shed".to_owned(),
            Policy::Shed(Some(limit)) => format!("shed@{limit}"),
            Policy::Shadow(None) => "shadow".to_owned(),
            Policy::Shadow(Some(limit)) => format!("shadow@{limit}"),
        };
        f.pad(&name)
    }
}

impl FromStr for Policy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let limit = |l: &str| l.parse::<Limit>().map_err(|e| format!("policy {s:?}: {e}"));
        match s.split_once('@') {
            None if s == "none" => Ok(Policy::None),
            None if s == "shed" => Ok(Policy::Shed(None)),
            None if s == "tower" => Err("policy \"tower\" needs a limit: tower@N or tower@true".into()),
            Some(("tower", l)) => Ok(Policy::Tower(limit(l)?)),
            Some(("shed", l)) => Ok(Policy::Shed(Some(limit(l)?))),
            None if s == "shadow" => Ok(Policy::Shadow(None)),
            Some(("shadow", l)) => Ok(Policy::Shadow(Some(limit(l)?))),
            _ => Err(format!(
                "unknown policy {s:?} (expected none, tower@N, shed, shed@N, shadow or shadow@N; N a number or `true`)"
            )),
        }
    }
}

/// Parses a comma-separated list of policies.
pub fn parse_list(s: &str) -> Result<Vec<Policy>, String> {
    let policies: Vec<Policy> = s.split(',').map(str::parse).collect::<Result<_, _>>()?;
    if policies.is_empty() {
        return Err("no policy given".into());
    }
    Ok(policies)
}

/// A policy with its limit decided: what a server is built with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServerPolicy {
    /// No protection.
    None,
    /// tower's `load_shed` over a global concurrency limit of this size.
    Tower(usize),
    /// shed, at its defaults (`None`) or pinned at a limit.
    Shed(Option<usize>),
    /// The same engine in shadow mode.
    Shadow(Option<usize>),
}

impl fmt::Display for ServerPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServerPolicy::None => f.pad("none"),
            ServerPolicy::Tower(n) => f.pad(&format!("tower@{n}")),
            ServerPolicy::Shed(None) => f.pad("shed"),
            ServerPolicy::Shed(Some(n)) => f.pad(&format!("shed@{n}")),
            ServerPolicy::Shadow(None) => f.pad("shadow"),
            ServerPolicy::Shadow(Some(n)) => f.pad(&format!("shadow@{n}")),
        }
    }
}

impl ServerPolicy {
    /// Puts the policy in front of the class routes, HTTP and gRPC:
    /// `route(class, protocol)` builds the handler of one class at
    /// `class.path()` or at its gRPC method (`grpc::path`). Both count
    /// against the one policy (one engine, one tower limit). Returns the router and, for shed, its
    /// engine (for `/stats`).
    ///
    /// # Errors
    ///
    /// When the shed engine refuses its limit.
    pub fn protect(
        self,
        load_feedback: bool,
        route: impl Fn(Class, Protocol) -> MethodRouter,
    ) -> Result<(Router, Option<Shedder>), ConfigError> {
        let plain = |wrap: &dyn Fn(Class, MethodRouter) -> MethodRouter| {
            Class::ALL.into_iter().fold(Router::new(), |router, class| {
                router
                    .route(class.path(), wrap(class, route(class, Protocol::Http)))
                    .route(grpc::path(class), wrap(class, route(class, Protocol::Grpc)))
            })
        };
        Ok(match self {
            ServerPolicy::None => (plain(&|_, r| r), None),
            ServerPolicy::Tower(limit) => (tower_policy(plain(&|_, r| r), limit), None),
            ServerPolicy::Shed(limit) | ServerPolicy::Shadow(limit) => {
                let mode = match self {
                    ServerPolicy::Shadow(_) => Mode::Shadow,
                    _ => Mode::Enforcing,
                };
                let shedder = match limit {
                    None => Shedder::builder().mode(mode).build()?,
                    Some(n) => Shedder::builder().limit(n).mode(mode).build()?,
                };
                // One ShedLayer per class route, all on one engine: the four
                // count against one limit and each is judged at its class.
                let router = plain(&|class, r| {
                    r.layer(
                        ShedLayer::new(shedder.clone())
                            .class(class.into())
                            .load_feedback(load_feedback),
                    )
                });
                (router, Some(shedder))
            }
        })
    }
}

/// The `tower@N` policy, as in axum's error-handling docs: `load_shed` over
/// a concurrency limit of `limit`, the overload error mapped to 503.
///
/// The limit is [`GlobalConcurrencyLimitLayer`], not `concurrency_limit(N)`:
/// `Router::layer` applies the layer to each route separately, and the plain
/// layer creates its semaphore per application, which would allow N per route
/// (4N in all). The global layer shares one semaphore of N.
fn tower_policy(router: Router, limit: usize) -> Router {
    router.layer(
        ServiceBuilder::new()
            .layer(HandleErrorLayer::new(overload_response))
            .load_shed()
            .layer(GlobalConcurrencyLimitLayer::new(limit)),
    )
}

/// tower's overload error as its user answers it: `503` over HTTP, and over
/// gRPC the `UNAVAILABLE` status tonic's own `load_shed` answers with.
async fn overload_response(headers: HeaderMap, err: BoxError) -> Response {
    let grpc = headers
        .get(CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"));
    match (err.is::<Overloaded>(), grpc) {
        (true, false) => (StatusCode::SERVICE_UNAVAILABLE, "overloaded").into_response(),
        (true, true) => tonic::Status::unavailable("overloaded")
            .into_http::<axum::body::Body>()
            .into_response(),
        (false, _) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "unexpected middleware error",
        )
            .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_print_as_they_are_written() {
        for s in [
            "none",
            "tower@64",
            "tower@true",
            "shed",
            "shed@8",
            "shed@true",
            "shadow",
            "shadow@8",
        ] {
            assert_eq!(s.parse::<Policy>().unwrap().to_string(), s);
        }
    }

    #[test]
    fn bad_policies_are_refused() {
        for s in ["tower", "shed@0", "shed@", "tower@x", "shedd", "none@3", ""] {
            assert!(s.parse::<Policy>().is_err(), "{s:?}");
        }
        assert!(parse_list("none,shed@nope").is_err());
    }

    #[test]
    fn true_resolves_to_the_calibrated_concurrency() {
        let p: Policy = "shed@true".parse().unwrap();
        assert!(p.needs_true_concurrency());
        assert_eq!(p.resolve(8), ServerPolicy::Shed(Some(8)));
        assert_eq!(Policy::Shed(None).resolve(8), ServerPolicy::Shed(None));
        assert_eq!(
            "tower@64".parse::<Policy>().unwrap().resolve(8),
            ServerPolicy::Tower(64)
        );
    }
}
