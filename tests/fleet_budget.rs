//! Issue 14's fleet retry bound, across real processes: client processes
//! that share nothing, each retrying through `ShedRetryLayer` on a budget of
//! its own, one of them killed midway and started again, against a loopback
//! server in a complete outage (every request refused with a 503 and no
//! Retry-After). The server counts every attempt; the count stays within the
//! bound `shed::retry` documents ("The bound across a fleet"), and above the
//! originals, so retries did happen and the bound was tested, not vacuous.
//!
//! Each client is this test binary run again, selecting the ignored test
//! `fleet_client`, with its orders in environment variables. A client waits
//! no backoff (a jitter of 0 draws a zero delay) and its deadline is far
//! beyond the run, so the counts do not depend on timing: the time limits
//! only stop a stuck run. The killed client is stopped at a known point (it
//! halts after a set number of operations and is killed while it waits), so
//! the counts are exact; a kill in the middle of an operation could only
//! lose attempts.

use std::net::SocketAddr;
use std::process::{Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use http::{HeaderMap, Request, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use shed::client::ShedRetryLayer;
use shed::retry::{Retrier, RetryBudget};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader, Lines};
use tokio::net::TcpListener;
use tokio::process::{Child, ChildStdout, Command};
use tower::{service_fn, Layer, Service, ServiceExt};

/// Client processes running at once.
const CLIENTS: u64 = 3;
/// Originals each client sends.
const ORIGINALS_PER_CLIENT: u64 = 30;
/// Operations the restarted client completes before it is killed; its
/// replacement sends the rest.
const HALT_AFTER: u64 = 12;
/// Restarts in the run: the one above.
const RESTARTS: u64 = 1;

/// The most any process of the test may take: a guard against a stuck run,
/// far above what the run needs.
const PROCESS_TIME_LIMIT: Duration = Duration::from_secs(120);

/// Where a client sends its requests.
const SERVER_VAR: &str = "SHED_FLEET_SERVER";
/// How many originals a client sends.
const ORIGINALS_VAR: &str = "SHED_FLEET_ORIGINALS";
/// The client's budget: `own` (`RetryBudget::default`), or
/// `share:<fleet initial>:<fleet max>:<processes>` (`RetryBudget::fleet_share`).
const BUDGET_VAR: &str = "SHED_FLEET_BUDGET";
/// When set, the client halts after that many operations and waits to be killed.
const HALT_VAR: &str = "SHED_FLEET_HALT_AFTER";
/// What a client prints when it has halted.
const HALTED: &str = "fleet client halted";

/// The server in a complete outage: refuses every request with a 503 and
/// no Retry-After, counting attempts and, of them, originals.
struct Outage {
    addr: SocketAddr,
    attempts: Arc<AtomicU64>,
    originals: Arc<AtomicU64>,
}

impl Outage {
    async fn start() -> Outage {
        let attempts = Arc::new(AtomicU64::new(0));
        let originals = Arc::new(AtomicU64::new(0));
        let counted = (Arc::clone(&attempts), Arc::clone(&originals));
        let app = Router::new().fallback(move |headers: HeaderMap| {
            let (attempts, originals) = counted.clone();
            async move {
                attempts.fetch_add(1, Ordering::Relaxed);
                if headers.get("shed-attempt").is_some_and(|n| n == "1") {
                    originals.fetch_add(1, Ordering::Relaxed);
                }
                StatusCode::SERVICE_UNAVAILABLE
            }
        });
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Outage {
            addr,
            attempts,
            originals,
        }
    }

    fn attempts(&self) -> u64 {
        self.attempts.load(Ordering::Relaxed)
    }

    fn originals(&self) -> u64 {
        self.originals.load(Ordering::Relaxed)
    }
}

/// A client process of the fleet, killed if it is dropped unfinished (a
/// failing test leaves none behind).
struct ClientProcess {
    child: Child,
    stdout: Lines<BufReader<ChildStdout>>,
}

impl ClientProcess {
    fn start(server: SocketAddr, budget: &str, originals: u64, halt_after: Option<u64>) -> Self {
        let mut command = Command::new(std::env::current_exe().unwrap());
        command
            .args(["fleet_client", "--exact", "--ignored", "--nocapture"])
            .env(SERVER_VAR, server.to_string())
            .env(ORIGINALS_VAR, originals.to_string())
            .env(BUDGET_VAR, budget)
            .env_remove(HALT_VAR)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Some(after) = halt_after {
            command.env(HALT_VAR, after.to_string());
        }
        let mut child = command.spawn().expect("the test binary runs again");
        let stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        ClientProcess { child, stdout }
    }

    /// Waits for the client to say it halted, then kills it.
    async fn kill_once_halted(mut self) {
        let halted = async {
            while let Some(line) = self.stdout.next_line().await.unwrap() {
                if line == HALTED {
                    return true;
                }
            }
            false
        };
        let halted = tokio::time::timeout(PROCESS_TIME_LIMIT, halted).await;
        if halted != Ok(true) {
            let _ = self.child.start_kill();
            let output = self.finish_output().await;
            panic!("the client never halted: {}", describe(&output));
        }
        self.child.kill().await.unwrap();
    }

    /// Waits for the client to finish and checks it succeeded.
    async fn finish(self) {
        let output = self.finish_output().await;
        assert!(output.status.success(), "{}", describe(&output));
    }

    /// Everything the client prints until it exits, and how it exited.
    async fn finish_output(mut self) -> Output {
        let mut stderr_pipe = self.child.stderr.take().unwrap();
        let finished = async {
            let read_stdout = async {
                let mut stdout = String::new();
                while let Ok(Some(line)) = self.stdout.next_line().await {
                    stdout.push_str(&line);
                    stdout.push('\n');
                }
                stdout.into_bytes()
            };
            let read_stderr = async {
                let mut stderr = Vec::new();
                let _ = stderr_pipe.read_to_end(&mut stderr).await;
                stderr
            };
            let (stdout, stderr) = tokio::join!(read_stdout, read_stderr);
            let status = self.child.wait().await.unwrap();
            Output {
                status,
                stdout,
                stderr,
            }
        };
        // On timeout the panic drops the child, which kills it.
        tokio::time::timeout(PROCESS_TIME_LIMIT, finished)
            .await
            .expect("the client finishes in time")
    }
}

fn describe(output: &Output) -> String {
    format!(
        "client {}\n--- stdout\n{}--- stderr\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    )
}

/// Runs the fleet against `outage`, every client with `budget`: `CLIENTS`
/// clients sending `ORIGINALS_PER_CLIENT` originals each, the last killed
/// after `HALT_AFTER` operations and started again for the rest.
async fn run_fleet(outage: &Outage, budget: &str) {
    let steady: Vec<_> = (1..CLIENTS)
        .map(|_| ClientProcess::start(outage.addr, budget, ORIGINALS_PER_CLIENT, None))
        .collect();
    let first_life =
        ClientProcess::start(outage.addr, budget, ORIGINALS_PER_CLIENT, Some(HALT_AFTER));
    first_life.kill_once_halted().await;
    let second_life =
        ClientProcess::start(outage.addr, budget, ORIGINALS_PER_CLIENT - HALT_AFTER, None);
    for client in steady.into_iter().chain([second_life]) {
        client.finish().await;
    }
}

#[tokio::test]
async fn own_budgets_and_a_restart_stay_within_the_fleet_bound_in_an_outage() {
    let outage = Outage::start().await;
    run_fleet(&outage, "own").await;

    let originals = outage.originals();
    let attempts = outage.attempts();
    assert_eq!(originals, CLIENTS * ORIGINALS_PER_CLIENT);
    let initial = RetryBudget::default().initial_tenths() / 10;
    // A <= O + N * I + S * I + floor(O / 10)
    let bound = originals + CLIENTS * initial + RESTARTS * initial + originals / 10;
    println!("own budgets: {attempts} attempts for {originals} originals, bound {bound}");
    assert!(attempts <= bound, "{attempts} attempts, bound {bound}");
    assert!(
        attempts > originals,
        "no retry was made: the bound is vacuous"
    );
    let without_restarts = originals + CLIENTS * initial + originals / 10;
    assert!(
        attempts > without_restarts,
        "{attempts} attempts: the restart's refilled balance was spent, and a bound \
         without it ({without_restarts}) does not hold"
    );
}

#[tokio::test]
async fn fleet_shares_and_a_restart_stay_within_the_stated_fleet_budget_in_an_outage() {
    const FLEET_INITIAL: u32 = 4;
    const FLEET_MAX: u32 = 12;
    let outage = Outage::start().await;
    let share = format!("share:{FLEET_INITIAL}:{FLEET_MAX}:{CLIENTS}");
    run_fleet(&outage, &share).await;

    let originals = outage.originals();
    let attempts = outage.attempts();
    assert_eq!(originals, CLIENTS * ORIGINALS_PER_CLIENT);
    let processes = u32::try_from(CLIENTS).unwrap();
    let share_tenths = RetryBudget::fleet_share(FLEET_INITIAL, FLEET_MAX, processes)
        .unwrap()
        .initial_tenths();
    // A <= O + I_F + floor((S * s + O) / 10)
    let bound = originals + u64::from(FLEET_INITIAL) + (RESTARTS * share_tenths + originals) / 10;
    println!("fleet shares: {attempts} attempts for {originals} originals, bound {bound}");
    assert!(attempts <= bound, "{attempts} attempts, bound {bound}");
    assert!(
        attempts > originals,
        "no retry was made: the bound is vacuous"
    );
}

/// One client process of the fleet tests above, which start it with its
/// orders in the environment; without them there is nothing to run.
#[tokio::test]
#[ignore = "a client process of the fleet tests, started by them"]
async fn fleet_client() {
    let Ok(server) = std::env::var(SERVER_VAR) else {
        return;
    };
    let originals: u64 = env_number(ORIGINALS_VAR).expect("the fleet test says how many");
    let halt_after = env_number(HALT_VAR);
    let budget = budget_from(&std::env::var(BUDGET_VAR).unwrap());
    let retrier = Retrier::builder()
        .budget(Arc::new(budget))
        .jitter(|| 0.0)
        .deadline(Duration::from_secs(3_600))
        .build()
        .unwrap();
    let http = Client::builder(TokioExecutor::new()).build_http::<String>();
    let mut client =
        ShedRetryLayer::new(retrier).layer(service_fn(move |request| http.request(request)));

    for done in 1..=originals {
        let request = Request::get(format!("http://{server}/"))
            .body(String::new())
            .unwrap();
        let response = client.ready().await.unwrap().call(request).await;
        let status = response.expect("the outage answers every attempt").status();
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        if halt_after == Some(done) {
            println!("{HALTED}");
            // Killed while waiting; returns only if the test is gone.
            let _ = tokio::io::stdin().read(&mut [0; 1]).await;
            return;
        }
    }
}

fn env_number(var: &str) -> Option<u64> {
    std::env::var(var).ok().map(|value| value.parse().unwrap())
}

fn budget_from(spec: &str) -> RetryBudget {
    if spec == "own" {
        return RetryBudget::default();
    }
    let numbers: Vec<u32> = spec
        .strip_prefix("share:")
        .expect("`own` or `share:<initial>:<max>:<processes>`")
        .split(':')
        .map(|number| number.parse().unwrap())
        .collect();
    RetryBudget::fleet_share(numbers[0], numbers[1], numbers[2]).unwrap()
}
