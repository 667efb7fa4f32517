//! Sealing: every object that leaves memory is encrypted and authenticated with AES-256-GCM
//! (ring's: AES-NI, VAES and CLMUL where the CPU has them, 10.4 GB/s a core in BENCHMARKS.md)
//! under a key made for this run in memory and never written anywhere.
//!
//! - The nonce is the segment's id (a per-run counter, never reused) and the object's index
//!   in it: no two objects are ever sealed under the same nonce, compaction included, since a
//!   compacted object goes into a new segment with a new id.
//! - The associated data is the segment id and the swap slot, so an object read from another
//!   place (another segment, another slot, a replayed older segment) fails to open.
//! - An object that fails to open is never returned: its page is poisoned.

use ring::aead::{Aad, LessSafeKey, Nonce, Tag, UnboundKey, AES_256_GCM};
use ring::rand::{SecureRandom, SystemRandom};

use crate::swap::slots::SwapSlot;

/// Bytes of a sealed object's authentication tag (kept in memory, segments/mod.rs).
pub const TAG_BYTES: usize = 16;

/// The run's key: made from the OS's random source, held only here.
pub struct Sealer {
    key: LessSafeKey,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sealer(AES-256-GCM, key not shown)")
    }
}

/// Where an object is sealed: what its nonce and associated data are made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SealedAt {
    /// The segment's id (never reused in a run).
    pub segment: u64,
    /// The object's index in the segment.
    pub index: u32,
    /// The swap slot whose page the object holds.
    pub slot: SwapSlot,
}

impl SealedAt {
    fn nonce(self) -> Nonce {
        let mut n = [0u8; 12];
        n[..8].copy_from_slice(&self.segment.to_le_bytes());
        n[8..].copy_from_slice(&self.index.to_le_bytes());
        Nonce::assume_unique_for_key(n)
    }

    fn aad(self) -> [u8; 12] {
        let mut a = [0u8; 12];
        a[..8].copy_from_slice(&self.segment.to_le_bytes());
        a[8..].copy_from_slice(&self.slot.0.to_le_bytes());
        a
    }
}

impl Sealer {
    /// A sealer with a new random key.
    pub fn new() -> Self {
        let mut key = [0u8; 32];
        SystemRandom::new()
            .fill(&mut key)
            .expect("the OS's random source (getrandom) works");
        let key = UnboundKey::new(&AES_256_GCM, &key).expect("a 32-byte key");
        Sealer {
            key: LessSafeKey::new(key),
        }
    }

    /// Encrypt `object` in place and return its tag.
    pub fn seal(&self, at: SealedAt, object: &mut [u8]) -> [u8; TAG_BYTES] {
        let tag = self
            .key
            .seal_in_place_separate_tag(at.nonce(), Aad::from(at.aad()), object)
            .expect("AES-GCM takes any object shorter than 64 GiB");
        let mut out = [0u8; TAG_BYTES];
        out.copy_from_slice(tag.as_ref());
        out
    }

    /// Decrypt `object` in place if `tag` authenticates it at `at`; false (and `object`
    /// garbage) otherwise.
    pub fn open(&self, at: SealedAt, object: &mut [u8], tag: &[u8]) -> bool {
        let Ok(tag) = Tag::try_from(tag) else {
            return false;
        };
        self.key
            .open_in_place_separate_tag(at.nonce(), Aad::from(at.aad()), tag, object, 0..)
            .is_ok()
    }
}

impl Default for Sealer {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const AT: SealedAt = SealedAt {
        segment: 7,
        index: 3,
        slot: SwapSlot(42),
    };

    #[test]
    fn an_object_opens_only_where_it_was_sealed_and_unchanged() {
        let sealer = Sealer::new();
        let plain: Vec<u8> = (0..1000u32).map(|i| (i % 251) as u8).collect();
        let mut object = plain.clone();
        let tag = sealer.seal(AT, &mut object);
        assert_ne!(object, plain, "sealed bytes are not the plaintext");

        let mut copy = object.clone();
        assert!(sealer.open(AT, &mut copy, &tag));
        assert_eq!(copy, plain);

        for other in [
            SealedAt { segment: 8, ..AT },
            SealedAt { index: 4, ..AT },
            SealedAt {
                slot: SwapSlot(43),
                ..AT
            },
        ] {
            let mut copy = object.clone();
            assert!(!sealer.open(other, &mut copy, &tag), "{other:?} opened");
        }
        for i in [0, 500, 999] {
            let mut copy = object.clone();
            copy[i] ^= 1;
            assert!(!sealer.open(AT, &mut copy, &tag), "flip at {i} opened");
        }
        let mut bad_tag = tag;
        bad_tag[0] ^= 0x80;
        assert!(!sealer.open(AT, &mut object.clone(), &bad_tag));
        assert!(!sealer.open(AT, &mut object.clone(), &tag[..15]));
        // Another run's key opens nothing of this one.
        assert!(!Sealer::new().open(AT, &mut object.clone(), &tag));
    }
}
