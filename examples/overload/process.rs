//! Servers in their own process, and CPU pinning.
//!
//! A [`ChildServer`] is this lab's own binary running `overload serve` on
//! loopback: it is started, found by the `listening on http://ADDR` line it
//! prints, and stopped by the lab. It never outlives the lab: it is killed
//! when dropped (on every exit path that unwinds or returns), and it exits by
//! itself when its stdin closes (`--exit-with-stdin`), which the kernel does
//! when the lab dies in any way, a signal included. Its stderr is kept, so a
//! panic in the server shows in the lab's report.
//!
//! [`pin_self`] moves the lab's own threads to one CPU with `taskset`, for
//! scenarios that give the server and the load generator a core each.

use std::{
    io,
    net::SocketAddr,
    path::PathBuf,
    process::{ExitStatus, Stdio},
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};

use tokio::{
    io::{AsyncBufReadExt, AsyncReadExt, BufReader},
    process::{Child, ChildStdin, Command},
    task::JoinHandle,
};

/// The environment variable that carries a child's arguments when the child
/// is the test harness (which refuses arguments it does not know).
pub const CHILD_ARGS_ENV: &str = "SHED_OVERLOAD_CHILD_ARGS";

/// Separates the arguments in [`CHILD_ARGS_ENV`].
const ARG_SEPARATOR: char = '\u{1f}';

/// How long a child may take to say where it listens.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// Most stderr kept from a child.
const STDERR_CAP: usize = 1 << 20;

/// How to start this lab's own binary as a child.
#[derive(Clone, Debug)]
pub struct Launcher {
    program: PathBuf,
    leading: Vec<String>,
    through_env: bool,
}

impl Launcher {
    /// The running binary, given the child's arguments on its command line.
    pub fn this_binary() -> io::Result<Self> {
        Ok(Launcher {
            program: std::env::current_exe()?,
            leading: Vec::new(),
            through_env: false,
        })
    }

    /// The running test harness, entering the lab through the ignored test
    /// `test` (an exact name), with the arguments in [`CHILD_ARGS_ENV`].
    #[cfg(test)]
    pub fn test_harness(test: &str) -> io::Result<Self> {
        Ok(Launcher {
            program: std::env::current_exe()?,
            leading: [
                test,
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ]
            .map(String::from)
            .to_vec(),
            through_env: true,
        })
    }

    /// The command running the lab with `args`, under `taskset -c cpu`
    /// when `cpu` is given.
    pub fn command(&self, args: &[String], cpu: Option<usize>) -> Command {
        let mut command = match cpu {
            Some(cpu) => {
                let mut c = Command::new("taskset");
                c.arg("-c").arg(cpu.to_string()).arg(&self.program);
                c
            }
            None => Command::new(&self.program),
        };
        command.args(&self.leading);
        if self.through_env {
            let joined: Vec<&str> = args.iter().map(String::as_str).collect();
            command.env(CHILD_ARGS_ENV, joined.join(&ARG_SEPARATOR.to_string()));
        } else {
            command.args(args);
        }
        command
    }
}

/// The arguments a test-harness child was given in [`CHILD_ARGS_ENV`].
#[cfg(test)]
pub fn child_args_from_env() -> Option<Vec<String>> {
    let joined = std::env::var(CHILD_ARGS_ENV).ok()?;
    Some(joined.split(ARG_SEPARATOR).map(String::from).collect())
}

/// What a child left when it was stopped.
#[derive(Debug)]
pub struct ChildExit {
    /// Everything it wrote to stderr (up to 1 MiB).
    pub stderr: String,
    /// How it ended, when known.
    pub status: Option<ExitStatus>,
}

impl ChildExit {
    /// Whether its stderr shows a panic.
    pub fn panicked(&self) -> bool {
        self.stderr.contains("panicked")
    }
}

/// `overload serve` in its own process; see the module docs.
pub struct ChildServer {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its process id.
    pub pid: u32,
    child: Child,
    stdin: Option<ChildStdin>,
    stderr: Arc<Mutex<String>>,
    readers: Vec<JoinHandle<()>>,
}

impl ChildServer {
    /// Starts `overload serve` with `serve_args` (which must not contain
    /// `serve` itself), pinned to `cpu` when given, and waits for its
    /// address.
    pub async fn spawn(
        launcher: &Launcher,
        serve_args: &[String],
        cpu: Option<usize>,
    ) -> Result<ChildServer, String> {
        let mut args = vec!["serve".to_owned(), "--exit-with-stdin".to_owned()];
        args.extend_from_slice(serve_args);
        let mut command = launcher.command(&args, cpu);
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command
            .spawn()
            .map_err(|e| format!("cannot start {launcher:?}: {e}"))?;
        let pid = child.id().ok_or("the child ended at once")?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().ok_or("no stdout pipe")?;
        let stderr_pipe = child.stderr.take().ok_or("no stderr pipe")?;

        let stderr = Arc::new(Mutex::new(String::new()));
        let stderr_reader = tokio::spawn(keep_stderr(stderr_pipe, Arc::clone(&stderr)));
        let mut lines = BufReader::new(stdout).lines();
        let found = tokio::time::timeout(START_TIMEOUT, async {
            while let Ok(Some(line)) = lines.next_line().await {
                // Anywhere in the line: the test harness may print before it.
                if let Some((_, addr)) = line.split_once("listening on http://") {
                    return addr.trim().parse::<SocketAddr>().ok();
                }
            }
            None
        })
        .await;
        let mut server = ChildServer {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            pid,
            child,
            stdin,
            stderr,
            readers: vec![stderr_reader],
        };
        match found {
            Ok(Some(addr)) => {
                server.addr = addr;
                // Keep draining stdout so the child never blocks on it.
                server.readers.push(tokio::spawn(async move {
                    while let Ok(Some(_)) = lines.next_line().await {}
                }));
                Ok(server)
            }
            _ => {
                let exit = server.stop().await;
                Err(format!(
                    "the child server did not say where it listens within {START_TIMEOUT:?} \
                     ({:?}); its stderr:\n{}",
                    exit.status, exit.stderr
                ))
            }
        }
    }

    /// Stops it: closes its stdin (it exits), kills it if it has not within
    /// 3 s, and returns its stderr.
    pub async fn stop(mut self) -> ChildExit {
        drop(self.stdin.take());
        let status = match tokio::time::timeout(Duration::from_secs(3), self.child.wait()).await {
            Ok(Ok(status)) => Some(status),
            _ => {
                let _ = self.child.kill().await;
                self.child.wait().await.ok()
            }
        };
        for reader in self.readers.drain(..) {
            let abort = reader.abort_handle();
            if tokio::time::timeout(Duration::from_secs(1), reader)
                .await
                .is_err()
            {
                abort.abort();
            }
        }
        let stderr = std::mem::take(&mut *self.stderr.lock().unwrap_or_else(|e| e.into_inner()));
        ChildExit { stderr, status }
    }
}

/// Appends what `pipe` delivers to `into`, up to [`STDERR_CAP`]; with
/// `RUST_LOG` set, also passes it on to the lab's stderr, so the child's
/// traces show beside the lab's.
async fn keep_stderr(mut pipe: tokio::process::ChildStderr, into: Arc<Mutex<String>>) {
    let pass_on = std::env::var_os("RUST_LOG").is_some();
    let mut buf = vec![0u8; 8192];
    while let Ok(n) = pipe.read(&mut buf).await {
        if n == 0 {
            break;
        }
        if pass_on {
            eprint!("{}", String::from_utf8_lossy(&buf[..n]));
        }
        let mut kept = into.lock().unwrap_or_else(|e| e.into_inner());
        if kept.len() < STDERR_CAP {
            kept.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    }
}

/// The CPUs this process may run on (from `/proc/self/status`), or empty
/// when that cannot be read.
pub fn allowed_cpus() -> Vec<usize> {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                .map(|list| parse_cpu_list(list.trim()))
        })
        .unwrap_or_default()
}

/// Parses a CPU list such as `0-2,5`.
fn parse_cpu_list(list: &str) -> Vec<usize> {
    let mut cpus = Vec::new();
    for part in list.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<usize>(), b.parse::<usize>()) {
                    cpus.extend(a..=b);
                }
            }
            None => cpus.extend(part.parse::<usize>().ok()),
        }
    }
    cpus
}

/// Only one pin at a time, so the original affinity is the one restored.
static PINNED: AtomicBool = AtomicBool::new(false);

/// This process's threads pinned to one CPU; dropping it restores the
/// CPUs they had.
pub struct PinnedSelf {
    original: String,
}

/// Pins every thread of this process to `cpu` with `taskset -a`. Threads
/// started later inherit the affinity of the thread that starts them.
pub fn pin_self(cpu: usize) -> Result<PinnedSelf, String> {
    if PINNED.swap(true, Ordering::SeqCst) {
        return Err("this process is already pinned".into());
    }
    let cpus = allowed_cpus();
    if cpus.is_empty() {
        PINNED.store(false, Ordering::SeqCst);
        return Err("cannot read this process's CPUs".into());
    }
    let original = cpus
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(",");
    match taskset_self(&cpu.to_string()) {
        Ok(()) => Ok(PinnedSelf { original }),
        Err(e) => {
            PINNED.store(false, Ordering::SeqCst);
            Err(e)
        }
    }
}

impl Drop for PinnedSelf {
    fn drop(&mut self) {
        if let Err(e) = taskset_self(&self.original) {
            eprintln!("warning: could not restore this process's CPUs: {e}");
        }
        PINNED.store(false, Ordering::SeqCst);
    }
}

fn taskset_self(list: &str) -> Result<(), String> {
    let pid = std::process::id().to_string();
    let out = std::process::Command::new("taskset")
        .args(["-a", "-c", "-p", list, &pid])
        .stdout(Stdio::null())
        .output()
        .map_err(|e| format!("taskset: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "taskset -a -c -p {list} {pid}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Resident memory (VmRSS, KiB) and open descriptors of process `pid`.
pub fn resources(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let rss_kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count() as u64;
    Some((rss_kib, fds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_parse() {
        assert_eq!(parse_cpu_list("0-1"), [0, 1]);
        assert_eq!(parse_cpu_list("0,2-4,7"), [0, 2, 3, 4, 7]);
        assert_eq!(parse_cpu_list(""), Vec::<usize>::new());
        assert_eq!(parse_cpu_list("x,3"), [3]);
    }

    #[test]
    fn this_process_has_resources_to_read() {
        let (rss, fds) = resources(std::process::id()).expect("/proc is readable");
        assert!(rss > 0 && fds > 0);
    }
}
