//! Load feedback on a layer's answers: the `shed-load` header, which says
//! which ranks the replica sheds and how loaded it is (see
//! [`ShedLayer::load_feedback`](crate::ShedLayer::load_feedback)).

use std::cell::RefCell;

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

thread_local! {
    /// The last value this thread wrote, and the state it says.
    static LAST_WRITTEN: RefCell<Option<(LoadReport, HeaderValue)>> = const { RefCell::new(None) };
}

/// `report` as a header value. An `http` header value owns its bytes, so a
/// new one allocates; under overload one state is reported to many answers
/// in a row (the refusals of a burst), so each thread keeps the last value
/// it wrote and hands out clones of it (a reference count, no allocation)
/// while the state is unchanged.
fn header_value(report: LoadReport) -> HeaderValue {
    LAST_WRITTEN.with(|last| {
        let mut last = last.borrow_mut();
        if let Some((written, value)) = &*last {
            if *written == report {
                return value.clone();
            }
        }
        let value = HeaderValue::from_str(format_load_report(&report).as_str())
            .expect("names, digits, commas and spaces are always a valid header value");
        *last = Some((report, value.clone()));
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
    fn a_changed_state_is_written_anew() {
        let idle = LoadReport {
            limit: 8,
            ..LoadReport::default()
        };
        let busy = LoadReport {
            in_flight: 8,
            ..idle
        };
        assert_eq!(header_value(idle), header_value(idle));
        let read = wire::load_report(header_value(busy).as_bytes());
        assert_eq!(read, Some(busy));
    }
}
