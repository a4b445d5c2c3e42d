//! `cpu-bound`: the steps and goals of `unknown-capacity` against a server
//! whose work is CPU (see `cpu.rs`: about 10 ms per request in 1 ms slices,
//! no worker pool), in its own process pinned to one core with a runtime of
//! one thread, while the lab (the load generator) is pinned to another.
//!
//! "True concurrency" is measured the same way as for the worker pool: the
//! smallest closed-loop concurrency reaching 97% of the peak. On one core
//! that is 1 or 2 (a second request overlaps the first one's network and
//! client time); beyond it requests only share the core and each takes
//! longer. Wasted work is CPU time spent on requests whose caller got
//! nothing: dropped before the end (the caller hung up or timed out, or shed
//! cut it at its deadline) or finished after their deadline. The p99 goal is
//! 3x the no-load p99, not 1.5x: constant work queues visibly.

mod one_slot_floor;

use std::time::Duration;

use super::{figures, unknown_capacity, Ctx, Lab, Report, Scenario, Setup};
use crate::{
    class::Class,
    process::{allowed_cpus, pin_self},
    server::ServiceSpec,
    target::Placement,
    trial::Trial,
};
use one_slot_floor::OneSlot;

/// CPU work per request.
const WORK: Duration = Duration::from_millis(10);

/// About 10 ms of CPU per request (the loop's speed unmeasured: the run
/// measures it once, see [`measured`]).
pub const SERVICE: ServiceSpec = ServiceSpec::Cpu {
    work: WORK,
    iterations: None,
};

/// [`SERVICE`] with the loop's speed measured here, once, so that every
/// server process the run starts (the calibration's and each trial's)
/// burns the same work per request.
pub fn measured() -> ServiceSpec {
    ServiceSpec::Cpu {
        work: WORK,
        iterations: Some(crate::cpu::iterations_per_slice(crate::server::CPU_SLICE)),
    }
}

/// The server in its own process on the first CPU, one runtime thread;
/// this process pinned to the second. Without two CPUs or `taskset`, the
/// processes are not pinned and the table says so.
pub fn setup(lab: &Lab) -> Setup {
    let cpus = allowed_cpus();
    let mut notes = Vec::new();
    let (cpu, pinned) = match cpus.as_slice() {
        [server, generator, ..] => match pin_self(*generator) {
            Ok(p) => {
                notes.push(format!(
                    "the server runs in its own process pinned to CPU {server} (one runtime thread); \
                     the load generator (the lab's process) is pinned to CPU {generator}"
                ));
                (Some(*server), Some(p))
            }
            Err(e) => {
                notes.push(format!(
                    "NOT PINNED ({e}): server and generator share the CPUs"
                ));
                (None, None)
            }
        },
        _ => {
            notes.push(format!(
                "NOT PINNED: this process may use {} CPU(s), fewer than 2",
                cpus.len()
            ));
            (None, None)
        }
    };
    Setup {
        placement: Placement::Child {
            launcher: lab.launcher.clone(),
            cpu,
            threads: 1,
        },
        notes,
        pinned,
    }
}

/// The overload steps whose critical traffic sets a floor under the p99.
const FLOOR_STEPS: [&str; 2] = ["2x", "4x"];

/// The unknown-capacity scenario's table and goals, with a p99 goal of
/// three times the no-load p99 (constant work queues visibly), and under
/// them the floor one slot sets on that p99 ([`one_slot_floor_note`]).
pub fn report(ctx: &Ctx<'_>, trials: &[Trial]) -> Report {
    let mut report = unknown_capacity::report(ctx, trials, Scenario::CpuBound, 3.0);
    if let Some(note) = one_slot_floor_note(ctx, trials) {
        report.figures.note(note);
    }
    report
}

/// A note under the table: the least p99 of successes any door reaches on
/// one slot while it serves every critical request (see
/// [`one_slot_floor`]), at each overload step, from the run's own
/// calibration and critical arrival rate.
fn one_slot_floor_note(ctx: &Ctx<'_>, trials: &[Trial]) -> Option<String> {
    let floors: Vec<String> = FLOOR_STEPS
        .iter()
        .filter_map(|step| {
            let t = trials.iter().find(|t| t.spec.label == *step)?;
            let w = figures::after(&t.spec, ctx.lab.warm_up());
            let slot = OneSlot {
                critical_rate: t.spec.target_rate(w.start, w.end, Some(Class::Critical)),
                capacity: ctx.capacity(),
                own_ms: ctx.cal.no_load_p50_ms(),
            };
            let floor = slot.p99_floor_ms(t.spec.seed)?;
            Some(format!(
                "{step} {floor:.1} ms (critical {:.0}/s, {:.2} of the successes)",
                slot.critical_rate,
                slot.critical_share()
            ))
        })
        .collect();
    (!floors.is_empty()).then(|| {
        format!(
            "one slot serving every critical request first (simulated: Poisson arrivals, a slot of \
             1/capacity, the no-load p50 on top) keeps the p99 of successes at or above: {}",
            floors.join("; ")
        )
    })
}
