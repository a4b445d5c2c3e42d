//! Reading structured values out of a fuzzer's bytes.

/// A cursor over fuzz input: every read succeeds (missing bytes read as
/// zero), so any byte string is a valid input to every target.
#[derive(Debug)]
pub(crate) struct Input<'a> {
    bytes: &'a [u8],
}

impl<'a> Input<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Input<'a> {
        Input { bytes }
    }

    /// The next byte, or zero.
    pub(crate) fn u8(&mut self) -> u8 {
        self.take(1).first().copied().unwrap_or(0)
    }

    /// The next eight bytes, little-endian (missing bytes are zero).
    pub(crate) fn u64(&mut self) -> u64 {
        let mut word = [0u8; 8];
        let bytes = self.take(8);
        word[..bytes.len()].copy_from_slice(bytes);
        u64::from_le_bytes(word)
    }

    /// A `u64` spread over every magnitude: a word shifted right by a
    /// fuzzed amount, so that small values are as likely as huge ones.
    pub(crate) fn magnitude(&mut self) -> u64 {
        let shift = u32::from(self.u8() % 65);
        self.u64().checked_shr(shift).unwrap_or(0)
    }

    /// Up to `len` bytes.
    pub(crate) fn take(&mut self, len: usize) -> &'a [u8] {
        let (head, tail) = self.bytes.split_at(len.min(self.bytes.len()));
        self.bytes = tail;
        head
    }

    /// A slice whose length is the next byte.
    pub(crate) fn chunk(&mut self) -> &'a [u8] {
        let len = usize::from(self.u8());
        self.take(len)
    }

    /// Everything left.
    pub(crate) fn rest(self) -> &'a [u8] {
        self.bytes
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}
