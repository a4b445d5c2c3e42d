//! Settings an operator changes on a running engine: checked as the builder
//! checks them, in force for the next request, and losing no slot and no
//! waiting request. (Retry-After's cap: tests/retry_after.rs; the
//! queue-delay target: tests/controller.rs.)

mod common;

use common::{admitted, build, ms, queued};
use shed_core::{AdaptiveLimit, Arrival, Class, Shedder};

fn interactive() -> Arrival {
    Arrival::new(Class::Interactive)
}

#[test]
fn a_new_max_wait_bounds_the_next_waiter_and_not_those_already_waiting() {
    let (shedder, _clock) = build(Shedder::builder().limit(1));
    let _busy = admitted(shedder.admit(&interactive()));
    let before = queued(shedder.admit(&interactive()));
    let expiry_before = before.expires_at();

    shedder.set_max_wait(Class::Interactive, ms(50)).unwrap();
    let after = queued(shedder.admit(&interactive()));

    assert_eq!(before.expires_at(), expiry_before);
    assert!(after.expires_at() <= shedder.now() + ms(50));
    assert!(after.expires_at() < before.expires_at());
    assert_eq!(shedder.stats().queue_len(), 2, "both still wait");
}

#[test]
fn a_refused_change_names_the_setting_and_changes_nothing() {
    let (shedder, _clock) = build(Shedder::builder().limit(1));
    let _busy = admitted(shedder.admit(&interactive()));
    let error = shedder.set_max_wait(Class::Interactive, ms(0)).unwrap_err();
    assert_eq!(error.setting(), "max_wait");
    assert_eq!(
        error.to_string(),
        "invalid max_wait: for interactive is zero; give it a positive wait, or set queue_capacity(0) to disable waiting"
    );
    let waiter = queued(shedder.admit(&interactive()));
    assert_eq!(
        waiter.expires_at(),
        shedder.now() + ms(500),
        "the default wait"
    );

    assert_eq!(
        shedder.set_target_sojourn(ms(100)).unwrap_err().setting(),
        "target_sojourn"
    );
    assert_eq!(
        shedder.set_retry_after_cap(ms(10)).unwrap_err().setting(),
        "retry_after_cap"
    );
}

#[test]
fn narrowed_bounds_cut_the_limit_at_once_and_lose_no_slot() {
    let (shedder, _clock) =
        build(Shedder::builder().adaptive_limit(AdaptiveLimit::new().initial(32)));
    let held: Vec<_> = (0..32)
        .map(|_| admitted(shedder.admit(&interactive())))
        .collect();

    shedder.set_limit_bounds(1, 16).unwrap();
    assert_eq!(shedder.limit(), 16);
    assert_eq!(shedder.stats().limit_bounds, (1, 16));
    assert_eq!(
        shedder.in_flight(),
        32,
        "the excess drains, nothing is cut off"
    );
    let waiting = queued(shedder.admit(&interactive()));

    drop(held);
    assert_eq!(shedder.in_flight(), 1, "the waiter took a freed slot");
    drop(waiting);
    assert_eq!(shedder.in_flight(), 0);
}

#[test]
fn widened_bounds_let_the_limit_be_raised_again() {
    let (shedder, _clock) =
        build(Shedder::builder().adaptive_limit(AdaptiveLimit::new().initial(8).max(8)));
    shedder.set_limit(20).unwrap();
    assert_eq!(shedder.limit(), 8, "held under the old maximum");
    shedder.set_limit_bounds(1, 64).unwrap();
    shedder.set_limit(20).unwrap();
    assert_eq!(shedder.limit(), 20);
}

#[test]
fn a_pinned_limit_has_no_bounds_to_move() {
    let (shedder, _clock) = build(Shedder::builder().limit(8));
    let error = shedder.set_limit_bounds(1, 16).unwrap_err();
    assert_eq!(error.setting(), "limit_bounds");
    assert!(error.to_string().contains("set_limit"), "{error}");
    assert_eq!(shedder.stats().limit_bounds, (8, 8));
    shedder.set_limit(12).unwrap();
    assert_eq!(
        shedder.stats().limit_bounds,
        (12, 12),
        "a pinned limit is its own bounds"
    );
    assert_eq!(
        shedder.set_limit_bounds(16, 1).unwrap_err().to_string(),
        "invalid limit_bounds: are min 16, max 1; set them so that min <= max"
    );
}
