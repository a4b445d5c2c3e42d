//! The workload of the instruction-count regression guard (`.ci/instructions`).
//!
//! `guard OP N` builds the engine state for `OP`, then performs `OP` `N` times.
//! The guard runs it under callgrind twice with different `N` and divides the
//! difference in instructions by the difference in `N`: setup, process start
//! and exit cancel out, leaving the exact instructions of one operation.
//!
//! Operations (the hot paths the design promises stay lock- and
//! allocation-free):
//! - `reject_by_level`: a request refused by a raised admission level;
//! - `reject_by_deadline`: a request whose deadline has already passed;
//! - `admit_release`: the admit fast path and the release of its permit.
//!
//! Without arguments (as `cargo test` and `cargo bench` run it) it performs
//! each operation a few times and exits: a smoke test that keeps it compiling.

use std::hint::black_box;

use shed_core::{Arrival, Class};

#[path = "common/mod.rs"]
mod common;

const OPS: [&str; 3] = ["reject_by_level", "reject_by_deadline", "admit_release"];

fn run(op: &str, n: u64) {
    match op {
        "reject_by_level" => {
            let (shedder, _overload) = common::overloaded();
            let arrival = common::shed_arrival();
            for _ in 0..n {
                common::refuse(&shedder, black_box(&arrival));
            }
        }
        "reject_by_deadline" => {
            let shedder = common::idle(64);
            let arrival = common::late_arrival(&shedder);
            for _ in 0..n {
                common::refuse(&shedder, black_box(&arrival));
            }
        }
        "admit_release" => {
            let shedder = common::idle(64);
            let arrival = Arrival::new(Class::Interactive);
            for _ in 0..n {
                common::admit_release(&shedder, black_box(&arrival));
            }
        }
        other => {
            eprintln!("unknown operation {other:?}; expected one of {OPS:?}");
            std::process::exit(2);
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [op, n] if !op.starts_with('-') => {
            let n = n.parse().unwrap_or_else(|_| {
                eprintln!("N must be a whole number, got {n:?}");
                std::process::exit(2);
            });
            run(op, n);
        }
        _ => {
            for op in OPS {
                run(op, 10);
            }
            println!("guard: smoke run of {} operations passed", OPS.len());
        }
    }
}
