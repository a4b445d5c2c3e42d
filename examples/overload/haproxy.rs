//! HAProxy in front of the fleet's replicas: Debian's package, installed
//! by the lab when missing, run in the foreground as a child of the lab with
//! a configuration written for the trial (`balance leastconn`, HTTP mode, so
//! each request is balanced).

use std::{
    net::{SocketAddr, TcpListener},
    path::{Path, PathBuf},
    process::Stdio,
    time::Duration,
};

use tokio::process::{Child, Command};

/// How long HAProxy may take to accept connections.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// The HAProxy version line, installing the package first when it is
/// missing (`apt-get install haproxy`; needs root and the Debian mirrors).
pub fn ensure_installed() -> Result<String, String> {
    if let Some(version) = version() {
        return Ok(version);
    }
    eprintln!("[fleet] HAProxy is missing: apt-get install -y haproxy ...");
    let install = |args: &[&str]| {
        std::process::Command::new("apt-get")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdout(Stdio::null())
            .status()
            .map_err(|e| format!("cannot run apt-get: {e}"))
    };
    install(&["update", "-qq"])?;
    let status = install(&["install", "-y", "-qq", "haproxy"])?;
    match version() {
        Some(version) => Ok(version),
        None => Err(format!(
            "HAProxy is not installed and `apt-get install -y haproxy` failed ({status}): \
             install it (Debian/Ubuntu: apt-get install haproxy) and run again"
        )),
    }
}

fn version() -> Option<String> {
    let out = std::process::Command::new("haproxy")
        .arg("-v")
        .output()
        .ok()?;
    // "HAProxy version 2.6.12-1+deb12u4 2026/10/17 - https://haproxy.org/"
    let text = String::from_utf8_lossy(&out.stdout);
    let version = text.split_whitespace().nth(2)?;
    Some(format!("HAProxy {version}"))
}

/// A running HAProxy; killed when dropped.
pub struct Haproxy {
    /// Where it listens.
    pub addr: SocketAddr,
    child: Child,
    config: PathBuf,
}

impl Haproxy {
    /// Starts HAProxy balancing `backends` with `leastconn`, its
    /// configuration written under `dir`, and waits until it accepts
    /// connections.
    pub async fn start(backends: &[SocketAddr], dir: &Path) -> Result<Haproxy, String> {
        let addr = free_port()?;
        let config = dir.join("haproxy.cfg");
        std::fs::write(&config, configuration(addr, backends))
            .map_err(|e| format!("cannot write {}: {e}", config.display()))?;
        let log = dir.join("haproxy.log");
        let stderr = std::fs::File::create(&log)
            .map_err(|e| format!("cannot write {}: {e}", log.display()))?;
        let child = Command::new("haproxy")
            .arg("-db") // foreground, no daemon
            .arg("-f")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start haproxy: {e}"))?;
        let proxy = Haproxy {
            addr,
            child,
            config,
        };
        let ready = tokio::time::timeout(START_TIMEOUT, async {
            while tokio::net::TcpStream::connect(addr).await.is_err() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
        match ready {
            Ok(()) => Ok(proxy),
            Err(_) => Err(format!(
                "haproxy did not accept connections on {addr} within {START_TIMEOUT:?} \
                 (configuration {}, its stderr in {})",
                proxy.config.display(),
                log.display()
            )),
        }
    }

    /// Stops it.
    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}

/// A port free now on loopback (HAProxy cannot be told to pick one).
fn free_port() -> Result<SocketAddr, String> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| format!("no free port on loopback: {e}"))
}

/// The configuration: one thread, HTTP mode with keep-alive on both sides,
/// `leastconn` over `backends`, timeouts longer than any caller waits.
fn configuration(addr: SocketAddr, backends: &[SocketAddr]) -> String {
    let mut config = format!(
        "global\n  nbthread 1\n  maxconn 4000\n\n\
         defaults\n  mode http\n  option http-keep-alive\n  timeout connect 1s\n  \
         timeout client 10s\n  timeout server 10s\n\n\
         frontend fleet\n  bind {addr}\n  default_backend replicas\n\n\
         backend replicas\n  balance leastconn\n"
    );
    for (i, backend) in backends.iter().enumerate() {
        config.push_str(&format!("  server r{i} {backend} maxconn 2000\n"));
    }
    config
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_configuration_balances_every_backend_by_least_connections() {
        let backends: Vec<SocketAddr> = ["127.0.0.1:9001", "127.0.0.1:9002"]
            .iter()
            .map(|a| a.parse().unwrap())
            .collect();
        let config = configuration("127.0.0.1:9000".parse().unwrap(), &backends);
        assert!(config.contains("bind 127.0.0.1:9000"));
        assert!(config.contains("balance leastconn"));
        assert!(config.contains("server r0 127.0.0.1:9001"));
        assert!(config.contains("server r1 127.0.0.1:9002"));
    }
}
