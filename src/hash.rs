//! FNV-1a (64-bit): a hash that is the same on every machine, build and run, unlike std's
//! `DefaultHasher`. Item and batch fingerprints (journaled, compared across runs) and the
//! `--shard` slice of an id are computed with it.

/// FNV-1a, 64 bits: a hash that is stable across builds and platforms (unlike std's
/// `DefaultHasher`). Used to notice a changed prompt on resume, to slice a batch into
/// shards, and to fingerprint a batch.
#[derive(Debug, Clone, Copy)]
pub struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    /// Feed bytes.
    pub fn update(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }

    /// The hash so far.
    pub fn value(&self) -> u64 {
        self.0
    }

    /// The hash so far as 16 hex digits.
    pub fn hex(&self) -> String {
        format!("{:016x}", self.0)
    }
}

/// FNV-1a of `bytes`, as a number.
pub fn fnv(bytes: &[u8]) -> u64 {
    let mut h = Fnv::default();
    h.update(bytes);
    h.value()
}

/// FNV-1a of `text` as 16 hex digits.
pub fn stable_hash(text: &str) -> String {
    let mut h = Fnv::default();
    h.update(text.as_bytes());
    h.hex()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stable_hash_is_fnv1a() {
        assert_eq!(stable_hash(""), "cbf29ce484222325");
        assert_eq!(stable_hash("a"), "af63dc4c8601ec8c");
    }
}
