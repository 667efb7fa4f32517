//! Audit: recompute every gauge and charge from the entries themselves and compare. Tests
//! call it after every step; it needs the instance to be quiet (no operation in flight).

use std::sync::atomic::Ordering::Relaxed;

use crate::swap::cache::Kind;
use crate::PAGE_SIZE;

use super::Zswap;

impl Zswap {
    /// Check that counters, charges, pool and slot usage agree with the entries. Returns the
    /// first disagreement.
    pub fn audit(&self) -> Result<(), String> {
        let s = self.shared();
        let (mut stored, mut raw, mut zero, mut slots, mut compressed) = (0u64, 0, 0, 0u64, 0);
        for g in s.live_groups() {
            let (mut g_bytes, mut g_pages) = (0u64, 0u64);
            let populated: Vec<_> = g.cache.populated().collect();
            for off in populated.into_iter().flatten() {
                if g.cache.is_locked(off) {
                    return Err(format!("page {off} is still locked"));
                }
                let st = g.cache.peek(off);
                let folio = g.cache.lock_page(off);
                if folio.slot(off).is_some() {
                    slots += 1;
                    if !matches!(st.kind, Kind::Stored | Kind::OnDisk) {
                        return Err(format!("page {off} is {:?} but holds a slot", st.kind));
                    }
                } else if st.kind == Kind::OnDisk {
                    return Err(format!("page {off} is on disk without a slot"));
                }
                drop(folio);
                match st.kind {
                    Kind::Stored => {
                        let len = s
                            .pool
                            .obj_len(crate::zsmalloc::Handle::from_raw(st.payload))
                            as u64;
                        stored += 1;
                        g_pages += 1;
                        g_bytes += len;
                        if len == PAGE_SIZE as u64 {
                            raw += 1;
                        } else {
                            compressed += 1;
                        }
                    }
                    Kind::Zero => zero += 1,
                    Kind::OnDisk if super::writeback::on_disk_compressed(st.payload) => {
                        compressed += 1
                    }
                    _ => {}
                }
            }
            if g.zswap_bytes() != g_bytes || g.zswapped.load(Relaxed) != g_pages {
                return Err(format!(
                    "group charge {} bytes / {} pages, entries hold {g_bytes} / {g_pages}",
                    g.zswap_bytes(),
                    g.zswapped.load(Relaxed)
                ));
            }
        }
        let st = &s.stats;
        let check = |name: &str, counter: u64, real: u64| {
            if counter == real {
                Ok(())
            } else {
                Err(format!("{name} says {counter}, entries say {real}"))
            }
        };
        check("stored_pages", st.stored_pages.load(Relaxed), stored)?;
        check(
            "stored_incompressible_pages",
            st.stored_incompressible_pages.load(Relaxed),
            raw,
        )?;
        check(
            "same_filled_pages",
            st.same_filled_pages.load(Relaxed),
            zero,
        )?;
        check("pool objects", s.pool.nr_objects(), stored)?;
        check("compressor uses", s.compressors.total_users(), compressed)?;
        check(
            "swap slots used",
            s.swap.as_ref().map_or(0, |w| u64::from(w.used())),
            slots,
        )?;
        if let Some(log) = s.swap.as_ref().and_then(|w| w.segments()) {
            let held = log.audit()?;
            // A writethrough copy of a page still in the pool is in the log too.
            check("objects in segments", held, slots)?;
        }
        Ok(())
    }
}
