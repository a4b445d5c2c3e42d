//! Load feedback on a layer's answers: the `shed-load` header, which says
//! which ranks the replica sheds and how loaded it is (see
//! [`ShedLayer::load_feedback`](crate::ShedLayer::load_feedback)).

use std::cell::RefCell;
use std::time::{Duration, Instant};

use http::{HeaderMap, HeaderName, HeaderValue};
use shed_core::wire::{format_load_report, LoadReport, LOAD_HEADER};
use shed_core::Shedder;

/// The `shed-load` header name.
pub(crate) const LOAD: HeaderName = HeaderName::from_static(LOAD_HEADER);

/// The `grpc-status` name: its presence in a response head makes the head
/// the trailers (a trailers-only answer).
pub(crate) const GRPC_STATUS: HeaderName = HeaderName::from_static("grpc-status");

/// Writes the engine's state into answers.
#[derive(Clone, Debug)]
pub(crate) struct LoadFeedback {
    shedder: Shedder,
}

impl LoadFeedback {
    pub(crate) fn new(shedder: Shedder) -> LoadFeedback {
        LoadFeedback { shedder }
    }

    /// Puts the engine's state now into `headers` (a head or trailers),
    /// replacing any `shed-load` the inner service wrote.
    pub(crate) fn stamp(&self, headers: &mut HeaderMap) {
        headers.insert(LOAD, header_value(self.shedder.load_report()));
    }
}

/// How long a thread may repeat a value whose counts (in flight, limit,
/// queued) have since moved, as long as the level it states has not.
const COUNTS_FRESH_FOR: Duration = Duration::from_millis(10);

/// The last value a thread wrote.
struct Written {
    report: LoadReport,
    value: HeaderValue,
    at: Instant,
}

thread_local! {
    static LAST_WRITTEN: RefCell<Option<Written>> = const { RefCell::new(None) };
}

/// `report` as a header value. An `http` header value owns its bytes, so a
/// new one allocates. Each thread keeps the last value it wrote and hands
/// out clones of it (a reference count, no allocation) while the level it
/// states is the level now and its counts are either unchanged or under
/// [`COUNTS_FRESH_FOR`] old: in an overload the counts move with every
/// request, and a value per refusal would allocate on every refusal, where
/// this allocates at most once per thread per 10 ms, whatever the rate of
/// refusals. The level, what callers act on, is always the level now.
fn header_value(report: LoadReport) -> HeaderValue {
    LAST_WRITTEN.with(|last| {
        let mut last = last.borrow_mut();
        if let Some(written) = &*last {
            let same_level = written.report.level == report.level;
            if written.report == report || (same_level && written.at.elapsed() < COUNTS_FRESH_FOR) {
                return written.value.clone();
            }
        }
        let value = HeaderValue::from_str(format_load_report(&report).as_str())
            .expect("names, digits, commas and spaces are always a valid header value");
        *last = Some(Written {
            report,
            value: value.clone(),
            at: Instant::now(),
        });
        value
    })
}

#[cfg(test)]
mod tests {
    use shed_core::wire;

    use super::*;

    #[test]
    fn the_header_reads_back_as_the_engines_state() {
        let shedder = Shedder::builder().limit(8).build().unwrap();
        let mut headers = HeaderMap::new();
        LoadFeedback::new(shedder.clone()).stamp(&mut headers);
        let read = wire::load_report(headers[LOAD_HEADER].as_bytes());
        assert_eq!(read, Some(shedder.load_report()));
    }

    #[test]
    fn a_changed_level_is_written_anew_at_once() {
        let calm = LoadReport {
            limit: 8,
            ..LoadReport::default()
        };
        let shedding = LoadReport {
            level: shed_core::Level::new(128),
            in_flight: 8,
            ..calm
        };
        assert_eq!(header_value(calm), header_value(calm));
        let read = wire::load_report(header_value(shedding).as_bytes());
        assert_eq!(read, Some(shedding));
    }
}
