//! A permit held while a request is served, that counts as abandoned unless
//! the work is seen through.
//!
//! The adaptive limit learns from how long permits are held and how they
//! end. A request whose caller hung up (hyper drops the response future or
//! the body mid-way) or whose deadline cut it off says nothing about how
//! long the work takes, only that it took longer than that: a censored
//! sample. This guard makes every way a served request can end say which.

use shed_core::Permit;

/// A served request's permit: dropped, it gives the slot back as abandoned.
#[derive(Debug)]
pub(crate) struct HeldPermit(Option<Permit>);

impl HeldPermit {
    pub(crate) fn new(permit: Permit) -> HeldPermit {
        HeldPermit(Some(permit))
    }

    /// The work finished (successfully or not): a full sample.
    pub(crate) fn finish(mut self) {
        drop(self.0.take());
    }

    /// The deadline cut the work off.
    pub(crate) fn cut_at_deadline(mut self) {
        if let Some(permit) = self.0.take() {
            permit.cut_at_deadline();
        }
    }
}

impl Drop for HeldPermit {
    fn drop(&mut self) {
        if let Some(permit) = self.0.take() {
            permit.abandon();
        }
    }
}
