//! `overload drive`: one client process of the fleet scenario. It waits for
//! a start time common to every client process, offers open-loop load to one
//! address (the fleet's load balancer) with the lab's callers, and prints one
//! line per logical request on stdout, which the lab reads back.
//!
//! Times in the lines are milliseconds from the common start, so the records
//! of several processes merge onto one time axis (within the clocks' skew
//! between processes of one machine: none).

use std::{
    net::SocketAddr,
    sync::Arc,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use crate::{
    class::Class,
    client::{Attempt, AttemptResult, ClientConfig, LabClient, LogicalRecord},
    load::{self, Phase},
};

/// What marks a record line on a client's stdout (a test harness may print
/// lines of its own).
const RECORD: &str = "record ";

/// What one client process is told to do.
#[derive(Clone, Debug, PartialEq)]
pub struct DriveSpec {
    /// Where to send the load.
    pub target: SocketAddr,
    /// Arrivals per second, per class.
    pub rates: [f64; 4],
    /// How long to offer them.
    pub duration: Duration,
    /// Seed of the arrival processes.
    pub seed: u64,
    /// When to start, in milliseconds since the Unix epoch.
    pub start_at_ms: u64,
    /// Whether the callers go through shed's client throttle.
    pub throttle: bool,
}

impl DriveSpec {
    /// The arguments of `overload drive` that run this spec.
    pub fn args(&self) -> Vec<String> {
        let rates: Vec<String> = self.rates.iter().map(|r| format!("{r:.3}")).collect();
        let mut args: Vec<String> = [
            "drive",
            "--target",
            &self.target.to_string(),
            "--rates",
            &rates.join(","),
            "--secs",
            &format!("{:.3}", self.duration.as_secs_f64()),
            "--seed",
            &self.seed.to_string(),
            "--start-at-ms",
            &self.start_at_ms.to_string(),
        ]
        .map(String::from)
        .to_vec();
        if self.throttle {
            args.push("--throttle".into());
        }
        args
    }

    /// Parses the arguments after `drive`.
    pub fn parse(args: &[String]) -> Result<DriveSpec, String> {
        let mut spec = DriveSpec {
            target: SocketAddr::from(([127, 0, 0, 1], 0)),
            rates: [0.0; 4],
            duration: Duration::ZERO,
            seed: 1,
            start_at_ms: 0,
            throttle: false,
        };
        let mut it = args.iter();
        while let Some(flag) = it.next() {
            if flag == "--throttle" {
                spec.throttle = true;
                continue;
            }
            let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
            let bad = |e: &dyn std::fmt::Display| format!("{flag}: {e}");
            match flag.as_str() {
                "--target" => spec.target = value.parse().map_err(|e| bad(&e))?,
                "--rates" => {
                    let rates: Vec<f64> = value
                        .split(',')
                        .map(str::parse)
                        .collect::<Result<_, _>>()
                        .map_err(|e| bad(&e))?;
                    spec.rates = rates
                        .try_into()
                        .map_err(|_| bad(&"four rates, one per class"))?;
                }
                "--secs" => {
                    let secs: f64 = value.parse().map_err(|e| bad(&e))?;
                    spec.duration = Duration::try_from_secs_f64(secs).map_err(|e| bad(&e))?;
                }
                "--seed" => spec.seed = value.parse().map_err(|e| bad(&e))?,
                "--start-at-ms" => spec.start_at_ms = value.parse().map_err(|e| bad(&e))?,
                other => return Err(format!("drive: unknown flag {other}")),
            }
        }
        if spec.target.port() == 0 || spec.duration.is_zero() {
            return Err("drive needs --target and --secs".into());
        }
        Ok(spec)
    }
}

/// Milliseconds since the Unix epoch, now.
pub fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Runs `spec` with callers configured as `client` (and the throttle if
/// `spec` says so), printing each record.
pub async fn run(spec: DriveSpec, client: ClientConfig) {
    let client = ClientConfig {
        throttle: spec.throttle,
        ..client
    };
    let wait = spec.start_at_ms.saturating_sub(unix_ms());
    tokio::time::sleep(Duration::from_millis(wait)).await;
    let lab_client = LabClient::new(spec.target, client);
    let phases: Arc<[Phase]> = Arc::new([Phase {
        duration: spec.duration,
        rates: spec.rates,
        slowdown_pct: 100,
    }]);
    let drain = client.deadline + Duration::from_millis(500);
    let epoch = Instant::now();
    let generators: Vec<_> = Class::ALL
        .into_iter()
        .filter(|c| spec.rates[c.index()] > 0.0)
        .map(|c| {
            let seed = spec.seed.wrapping_mul(31).wrapping_add(c.index() as u64);
            tokio::spawn(load::generate(
                lab_client.clone(),
                c,
                Arc::clone(&phases),
                epoch,
                drain,
                seed,
            ))
        })
        .collect();
    for generator in generators {
        for record in generator.await.unwrap_or_default() {
            println!("{RECORD}{}", to_line(&record));
        }
    }
}

/// One record as a line: `class start_ms lag_ms end_ms success attempts`,
/// attempts as `sent_ms:result` joined by commas.
fn to_line(r: &LogicalRecord) -> String {
    let ms = |d: Duration| format!("{:.3}", d.as_secs_f64() * 1e3);
    let attempts: Vec<String> = r
        .attempts
        .iter()
        .map(|a| format!("{}:{}", ms(a.sent), result_token(a.result)))
        .collect();
    format!(
        "{} {} {} {} {} {}",
        r.class.index(),
        ms(r.start),
        ms(r.lag),
        ms(r.end),
        u8::from(r.success),
        attempts.join(",")
    )
}

/// Reads a record printed by a client process; `None` for any other line.
pub fn parse_line(line: &str) -> Option<LogicalRecord> {
    let fields: Vec<&str> = line.strip_prefix(RECORD)?.split(' ').collect();
    let [class, start, lag, end, success, attempts] = fields[..] else {
        return None;
    };
    let ms = |s: &str| {
        s.parse::<f64>()
            .ok()
            .map(|v| Duration::from_secs_f64(v / 1e3))
    };
    let attempts = attempts
        .split(',')
        .filter(|a| !a.is_empty())
        .map(|a| {
            let (sent, result) = a.split_once(':')?;
            Some(Attempt {
                sent: ms(sent)?,
                result: parse_result(result)?,
            })
        })
        .collect::<Option<Vec<_>>>()?;
    Some(LogicalRecord {
        class: *Class::ALL.get(class.parse::<usize>().ok()?)?,
        start: ms(start)?,
        lag: ms(lag)?,
        end: ms(end)?,
        attempts,
        success: success == "1",
    })
}

fn result_token(result: AttemptResult) -> String {
    match result {
        AttemptResult::Success => "ok".into(),
        AttemptResult::Status(s) => s.to_string(),
        AttemptResult::Grpc(code) => format!("g{}", code as i32),
        AttemptResult::Timeout => "timeout".into(),
        AttemptResult::Error => "io".into(),
        AttemptResult::HungUp => "hangup".into(),
        AttemptResult::RefusedLocally => "local".into(),
    }
}

fn parse_result(token: &str) -> Option<AttemptResult> {
    Some(match token {
        "ok" => AttemptResult::Success,
        "timeout" => AttemptResult::Timeout,
        "io" => AttemptResult::Error,
        "hangup" => AttemptResult::HungUp,
        "local" => AttemptResult::RefusedLocally,
        grpc if grpc.starts_with('g') => {
            AttemptResult::Grpc(tonic::Code::from_i32(grpc[1..].parse().ok()?))
        }
        status => AttemptResult::Status(status.parse().ok()?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_survives_its_line() {
        let record = LogicalRecord {
            class: Class::Batch,
            start: Duration::from_micros(1_500),
            lag: Duration::from_micros(20),
            end: Duration::from_millis(260),
            attempts: vec![
                Attempt {
                    sent: Duration::from_micros(1_500),
                    result: AttemptResult::Status(429),
                },
                Attempt {
                    sent: Duration::from_millis(200),
                    result: AttemptResult::Success,
                },
            ],
            success: true,
        };
        let back = parse_line(&format!("{RECORD}{}", to_line(&record))).unwrap();
        assert_eq!(back.class, record.class);
        assert_eq!(back.end, record.end);
        assert_eq!(back.attempts.len(), 2);
        assert_eq!(back.attempts[0].result, AttemptResult::Status(429));
        assert_eq!(back.attempts[1].sent, record.attempts[1].sent);
        assert!(back.success);
        assert!(parse_line("running 1 test").is_none());
    }

    #[test]
    fn the_arguments_parse_back_to_the_spec() {
        let spec = DriveSpec {
            target: "127.0.0.1:8080".parse().unwrap(),
            rates: [1.0, 2.5, 3.0, 0.0],
            duration: Duration::from_secs(3),
            seed: 9,
            start_at_ms: 1_700_000_000_000,
            throttle: true,
        };
        let args = spec.args();
        assert_eq!(args[0], "drive");
        assert_eq!(DriveSpec::parse(&args[1..]).unwrap(), spec);
    }
}
