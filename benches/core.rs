//! The engine's decisions, measured side by side in one criterion group
//! (`core`), so the report can state each as a ratio to the uncontended
//! admit + release fast path.
//!
//! - `reject_by_level`: a background retry refused by a raised admission
//!   level (the level is raised by really overloading the engine under a
//!   manual clock; the OS clock read is still paid on every decision).
//! - `reject_by_deadline`: a request whose deadline has already passed.
//! - `admit_release`: take a slot and give it back, nobody waiting.
//! - `admit_release_2_threads`: the same on two threads sharing one engine;
//!   the figure is the time per operation as each thread sees it.
//! - `queued_cycle`: one holder admitted, one request queued, the holder
//!   releases and hands its slot to the waiter, the waiter is polled to its
//!   permit and releases it: the whole slow path, lock included.
//!
//! - `os_clock_read`: `Instant::now()` alone, the clock read every decision
//!   includes, as a reference.
//!
//! Run: `cargo bench --bench core` (add `-- --quick` while developing).

use std::future::Future;
use std::hint::black_box;
use std::pin::Pin;
use std::sync::Barrier;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use shed_core::{Admission, Arrival, Class, Shedder, Waiter};

#[path = "common/mod.rs"]
mod common;

fn core(c: &mut Criterion) {
    let mut group = c.benchmark_group("core");

    // The reference every decision pays once: one read of the OS clock.
    group.bench_function("os_clock_read", |b| b.iter(Instant::now));

    let (overloaded, _overload) = common::overloaded();
    let shed = common::shed_arrival();
    group.bench_function("reject_by_level", |b| {
        b.iter(|| common::refuse(&overloaded, black_box(&shed)))
    });

    let idle = common::idle(64);
    let late = common::late_arrival(&idle);
    group.bench_function("reject_by_deadline", |b| {
        b.iter(|| common::refuse(&idle, black_box(&late)))
    });

    let arrival = Arrival::new(Class::Interactive);
    group.bench_function("admit_release", |b| {
        b.iter(|| common::admit_release(&idle, black_box(&arrival)))
    });

    group.bench_function("admit_release_2_threads", |b| {
        b.iter_custom(|iters| contended(&idle, &arrival, iters))
    });

    let one = common::idle(1);
    group.bench_function("queued_cycle", |b| {
        let mut cx = Context::from_waker(Waker::noop());
        b.iter(|| queued_cycle(&one, black_box(&arrival), &mut cx))
    });

    group.finish();
}

/// Two threads each run `iters` admit + release pairs on one engine, started
/// together; the slower thread's time is returned, so the figure is the time
/// per operation each thread sees while the other competes for the same word.
fn contended(shedder: &shed_core::Shedder, arrival: &Arrival, iters: u64) -> Duration {
    let start = Barrier::new(2);
    std::thread::scope(|scope| {
        let run = || {
            start.wait();
            let began = Instant::now();
            for _ in 0..iters {
                common::admit_release(shedder, black_box(arrival));
            }
            began.elapsed()
        };
        let other = scope.spawn(run);
        let mine = run();
        mine.max(other.join().expect("bench thread"))
    })
}

fn queued_cycle(shedder: &shed_core::Shedder, arrival: &Arrival, cx: &mut Context<'_>) {
    let Admission::Admitted(holder) = shedder.admit(arrival) else {
        panic!("an idle engine admits");
    };
    let Admission::Queued(mut waiter) = shedder.admit(arrival) else {
        panic!("a busy engine queues");
    };
    drop(holder);
    match Pin::new(&mut waiter).poll(cx) {
        Poll::Ready(Ok(permit)) => drop(black_box(permit)),
        other => panic!("the released slot goes to the waiter, got {other:?}"),
    }
}

fn cancel_storm(c: &mut Criterion) {
    let mut group = c.benchmark_group("cancel_storm");
    for depth in [10usize, 100, 10_000] {
        let shedder = Shedder::builder()
            .limit(1)
            .queue_capacity(depth)
            .build()
            .expect("valid settings");
        let arrival = Arrival::new(Class::Batch);
        let _holder = shedder.try_admit(&arrival).expect("an idle engine admits");
        group.throughput(Throughput::Elements(depth as u64));
        group.bench_function(BenchmarkId::from_parameter(depth), |b| {
            b.iter_batched(
                || full_queue(&shedder, &arrival, depth),
                |mut waiters| {
                    while let Some(waiter) = waiters.pop() {
                        drop(black_box(waiter));
                    }
                },
                BatchSize::PerIteration,
            )
        });
        assert_eq!(shedder.stats().queue_len(), 0);
    }
    group.finish();
}

/// `depth` waiters queued behind the held slot, in arrival order.
fn full_queue(shedder: &Shedder, arrival: &Arrival, depth: usize) -> Vec<Waiter> {
    (0..depth)
        .map(|_| match shedder.admit(arrival) {
            Admission::Queued(waiter) => waiter,
            other => panic!("a full engine queues up to its capacity, got {other:?}"),
        })
        .collect()
}

criterion_group!(benches, core, cancel_storm);
criterion_main!(benches);
