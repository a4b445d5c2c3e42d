//! Configuration: every invalid setting is refused at build time with a
//! message that names it and says what to do.

use std::time::Duration;

use shed_core::config::{MAX_LIMIT, MAX_QUEUE_CAPACITY};
use shed_core::{Class, ConfigError, Shedder, ShedderBuilder};

#[track_caller]
fn refused(builder: ShedderBuilder, setting: &str) -> ConfigError {
    let error = builder.build().expect_err("the setting is invalid");
    assert_eq!(error.setting(), setting, "{error}");
    let message = error.to_string();
    assert!(
        message.contains(setting),
        "{message:?} does not name {setting}"
    );
    assert!(
        message.contains("; set ") || message.contains("; give it"),
        "{message:?} does not say what to do"
    );
    error
}

#[test]
fn the_defaults_are_valid_and_the_limit_adapts_from_8_between_1_and_1000() {
    let shedder = Shedder::builder().build().unwrap();
    assert_eq!(shedder.limit(), 8);
    let stats = shedder.stats();
    assert_eq!(stats.limit_bounds, (1, 1_000));
    assert_eq!(stats.adaptive.map(|a| a.phase), Some("slow start"));
    assert!(Shedder::with_limit(8).is_ok());
}

#[test]
fn a_pinned_limit_has_no_adaptive_state() {
    let stats = Shedder::builder().limit(64).build().unwrap().stats();
    assert_eq!((stats.limit, stats.limit_bounds), (64, (64, 64)));
    assert_eq!(stats.adaptive, None);
}

#[test]
fn adaptive_limit_settings_out_of_range_are_refused() {
    use shed_core::AdaptiveLimit;
    let cases = [
        AdaptiveLimit::new().min(0),
        AdaptiveLimit::new().max(MAX_LIMIT + 1),
        AdaptiveLimit::new().min(10).max(5),
        AdaptiveLimit::new().initial(2).min(4),
        AdaptiveLimit::new().round_samples(8),
        AdaptiveLimit::new().max_round(Duration::ZERO),
        AdaptiveLimit::new().inflation(1.0),
        AdaptiveLimit::new().inflation(f64::NAN),
        AdaptiveLimit::new().censored_share(0.0),
        AdaptiveLimit::new().headroom(0.3, 0.1),
        AdaptiveLimit::new().headroom(-0.1, 0.1),
        AdaptiveLimit::new().refresh_rounds(1),
    ];
    for settings in cases {
        refused(
            Shedder::builder().adaptive_limit(settings),
            "adaptive_limit",
        );
    }
}

#[test]
fn a_zero_limit_is_refused() {
    refused(Shedder::builder().limit(0), "limit");
    assert_eq!(Shedder::with_limit(0).unwrap_err().setting(), "limit");
}

#[test]
fn a_limit_above_the_maximum_is_refused() {
    let error = refused(Shedder::builder().limit(MAX_LIMIT + 1), "limit");
    assert!(error.to_string().contains(&MAX_LIMIT.to_string()));
}

#[test]
fn a_queue_capacity_above_the_maximum_is_refused() {
    refused(
        Shedder::builder().queue_capacity(MAX_QUEUE_CAPACITY + 1),
        "queue_capacity",
    );
}

#[test]
fn a_zero_max_wait_is_refused_for_every_class() {
    for class in Class::ALL {
        let error = refused(
            Shedder::builder().max_wait(class, Duration::ZERO),
            "max_wait",
        );
        assert!(error.to_string().contains(class.as_str()), "{error}");
    }
}

#[test]
fn a_zero_interval_is_refused() {
    refused(Shedder::builder().interval(Duration::ZERO), "interval");
}

#[test]
fn an_interval_longer_than_a_minute_is_refused() {
    refused(
        Shedder::builder().interval(Duration::from_secs(61)),
        "interval",
    );
}

#[test]
fn a_zero_target_sojourn_is_refused() {
    refused(
        Shedder::builder().target_sojourn(Duration::ZERO),
        "target_sojourn",
    );
}

#[test]
fn a_target_sojourn_not_below_the_interval_is_refused() {
    let builder = Shedder::builder()
        .interval(Duration::from_millis(50))
        .target_sojourn(Duration::from_millis(50));
    refused(builder, "target_sojourn");
}

#[test]
fn zero_interval_completions_are_refused() {
    refused(
        Shedder::builder().interval_completions(0),
        "interval_completions",
    );
}

#[test]
fn a_shed_share_outside_zero_to_one_is_refused() {
    for share in [0.0, -0.1, 1.01, f64::NAN, f64::INFINITY] {
        refused(Shedder::builder().shed_share(share), "shed_share");
    }
}

#[test]
fn a_recovery_step_outside_one_to_1024_is_refused() {
    for step in [0, 1025] {
        refused(Shedder::builder().recovery_step(step), "recovery_step");
    }
}

#[test]
fn a_retry_after_cap_outside_one_second_to_one_day_is_refused() {
    for cap in [Duration::from_millis(999), Duration::from_secs(86_401)] {
        refused(Shedder::builder().retry_after_cap(cap), "retry_after_cap");
    }
}

#[test]
fn a_retry_after_jitter_outside_zero_to_one_is_refused() {
    for jitter in [-0.01, 1.01, f64::NAN] {
        refused(
            Shedder::builder().retry_after_jitter(jitter),
            "retry_after_jitter",
        );
    }
}

#[test]
fn the_extremes_of_every_range_are_accepted() {
    let lowest = Shedder::builder()
        .limit(1)
        .queue_capacity(0)
        .interval(Duration::from_millis(1))
        .target_sojourn(Duration::from_micros(1))
        .interval_completions(1)
        .shed_share(f64::MIN_POSITIVE)
        .recovery_step(1)
        .retry_after_cap(Duration::from_secs(1))
        .retry_after_jitter(0.0);
    assert!(lowest.build().is_ok());
    let highest = Shedder::builder()
        .limit(MAX_LIMIT)
        .queue_capacity(MAX_QUEUE_CAPACITY)
        .interval(Duration::from_secs(60))
        .interval_completions(u32::MAX)
        .shed_share(1.0)
        .recovery_step(1024)
        .retry_after_cap(Duration::from_secs(86_400))
        .retry_after_jitter(1.0);
    assert!(highest.build().is_ok());
}

#[test]
fn a_config_error_is_a_std_error_with_a_readable_message() {
    let error: Box<dyn std::error::Error> =
        Box::new(Shedder::builder().limit(0).build().unwrap_err());
    assert!(
        error.to_string().starts_with("invalid limit: is 0;"),
        "{error}"
    );
}
