//! The last few probe readings of one quantity, and a mean of them that a
//! reading far off does not move.

/// How many readings are kept: one probe round of 64 to 128 permits reads a
/// knee a sixth off, and now and then a third. Five, less the highest and
/// the lowest, average three, and one reading far off is simply dropped.
const KEPT: usize = 5;

/// The last [`KEPT`] readings of a knee or a baseline, since the last time
/// they were known to describe another service.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct Readings {
    /// The newest at `(next + KEPT - 1) % KEPT`; `len` of them are set.
    values: [f64; KEPT],
    next: usize,
    len: usize,
}

impl Readings {
    /// Adds a reading, dropping the oldest once [`KEPT`] are kept.
    pub(super) fn push(&mut self, value: f64) {
        self.values[self.next] = value;
        self.next = (self.next + 1) % KEPT;
        self.len = (self.len + 1).min(KEPT);
    }

    /// Forgets every reading but this one: the older ones described a
    /// service that has changed.
    pub(super) fn restart(&mut self, value: f64) {
        *self = Readings::default();
        self.push(value);
    }

    /// Forgets every reading.
    pub(super) fn clear(&mut self) {
        *self = Readings::default();
    }

    /// How many readings are kept.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// The newest reading, if any.
    #[cfg(test)]
    pub(super) fn latest(&self) -> Option<f64> {
        (self.len > 0).then(|| self.values[(self.next + KEPT - 1) % KEPT])
    }

    /// The mean of the readings kept, less the highest and the lowest once
    /// there are three or more; `None` before the first.
    pub(super) fn trimmed_mean(&self) -> Option<f64> {
        let mut kept = self.values;
        let kept = &mut kept[..self.len];
        kept.sort_by(f64::total_cmp);
        let middle = match kept {
            [] => return None,
            [_, _] | [_] => &kept[..],
            _ => &kept[1..kept.len() - 1],
        };
        Some(middle.iter().sum::<f64>() / middle.len() as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_reading_far_off_is_dropped_from_the_mean() {
        let mut knees = Readings::default();
        assert_eq!(knees.trimmed_mean(), None);
        knees.push(8.0);
        assert_eq!(knees.trimmed_mean(), Some(8.0));
        knees.push(9.0);
        assert_eq!(knees.trimmed_mean(), Some(8.5));
        knees.push(5.0);
        assert_eq!(knees.trimmed_mean(), Some(8.0));
        knees.push(7.0);
        assert_eq!(knees.trimmed_mean(), Some(7.5));
        knees.push(12.0);
        assert_eq!(knees.trimmed_mean(), Some(8.0));
        // The oldest (8) goes: 9, 5, 7, 12 and 10 are kept.
        knees.push(10.0);
        assert_eq!(knees.trimmed_mean(), Some((9.0 + 7.0 + 10.0) / 3.0));
    }

    #[test]
    fn a_restart_keeps_only_the_new_reading() {
        let mut baselines = Readings::default();
        for reading in [20.0, 21.0, 19.0] {
            baselines.push(reading);
        }
        baselines.restart(60.0);
        assert_eq!(baselines.trimmed_mean(), Some(60.0));
        baselines.push(62.0);
        assert_eq!(baselines.trimmed_mean(), Some(61.0));
        baselines.clear();
        assert_eq!(baselines.trimmed_mean(), None);
    }
}
