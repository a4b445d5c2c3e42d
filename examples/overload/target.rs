//! The server a trial drives, wherever it runs: in the lab's process, or in
//! a child process of its own (optionally pinned to a CPU).

use std::net::{Ipv4Addr, SocketAddr};

use crate::{
    admin::Admin,
    process::{ChildExit, ChildServer, Launcher},
    server::{LocalControl, Server, ServerConfig, ServerSample},
};

/// Where a server runs.
#[derive(Clone, Debug)]
pub enum Placement {
    /// In the lab's own process, on its runtime.
    Local,
    /// In a child process (`overload serve`).
    Child {
        /// How to start the lab's binary.
        launcher: Launcher,
        /// The CPU it is pinned to, if any.
        cpu: Option<usize>,
        /// Worker threads of its runtime (1: a current-thread runtime).
        threads: usize,
    },
}

/// A handle on a server's state and knobs.
#[derive(Clone)]
pub enum Control {
    /// A server in this process: read and set directly.
    Local(LocalControl),
    /// A server in another process: over HTTP.
    Remote(Box<Admin>),
}

impl Control {
    /// The server's state, or why it could not be read.
    pub async fn sample(&self) -> Result<ServerSample, String> {
        match self {
            Control::Local(c) => Ok(c.sample()),
            Control::Remote(a) => a.sample().await,
        }
    }

    /// Sets the service's slowdown, in percent.
    pub async fn set_slowdown_pct(&self, percent: u64) -> Result<(), String> {
        match self {
            Control::Local(c) => {
                c.set_slowdown_pct(percent);
                Ok(())
            }
            Control::Remote(a) => a.set_slowdown_pct(percent).await,
        }
    }

    /// Restarts the service-time draws from `seed`.
    pub async fn reseed(&self, seed: u64) -> Result<(), String> {
        match self {
            Control::Local(c) => {
                c.reseed(seed);
                Ok(())
            }
            Control::Remote(a) => a.reseed(seed).await,
        }
    }
}

/// A running server under test.
pub enum Target {
    /// In this process.
    Local(Server),
    /// In a child process.
    Child(Box<ChildServer>),
}

impl Target {
    /// Starts a server built as `config` says, where `placement` says.
    pub async fn start(config: &ServerConfig, placement: &Placement) -> Result<Target, String> {
        match placement {
            Placement::Local => Server::start(config, SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
                .await
                .map(Target::Local)
                .map_err(|e| e.to_string()),
            Placement::Child {
                launcher,
                cpu,
                threads,
            } => {
                let mut args = vec![
                    "--addr".to_owned(),
                    "127.0.0.1:0".to_owned(),
                    "--policy".to_owned(),
                    config.policy.to_string(),
                    "--seed".to_owned(),
                    config.seed.to_string(),
                    "--threads".to_owned(),
                    threads.to_string(),
                ];
                args.extend(config.service.serve_args());
                if config.load_feedback {
                    args.push("--load-feedback".to_owned());
                }
                ChildServer::spawn(launcher, &args, *cpu)
                    .await
                    .map(|c| Target::Child(Box::new(c)))
            }
        }
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        match self {
            Target::Local(s) => s.addr,
            Target::Child(c) => c.addr,
        }
    }

    /// Its process id, when it runs in its own process.
    pub fn pid(&self) -> Option<u32> {
        match self {
            Target::Local(_) => None,
            Target::Child(c) => Some(c.pid),
        }
    }

    /// A handle on its state and knobs.
    pub fn control(&self) -> Control {
        match self {
            Target::Local(s) => Control::Local(s.control.clone()),
            Target::Child(c) => Control::Remote(Box::new(Admin::new(c.addr))),
        }
    }

    /// Stops it; a child's stderr and exit come back.
    pub async fn stop(self) -> Option<ChildExit> {
        match self {
            Target::Local(s) => {
                s.stop().await;
                None
            }
            Target::Child(c) => Some((*c).stop().await),
        }
    }
}
