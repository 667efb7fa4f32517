//! Pages a fault could not read from the device once, left missing rather than poisoned
//! (swapin.rs says why): a second failure poisons them.

use std::collections::HashSet;

use crate::lock_order::{self, Mutex};

#[derive(Debug)]
pub(crate) struct ReadFailures(Mutex<HashSet<u32>>);

impl Default for ReadFailures {
    fn default() -> Self {
        ReadFailures(Mutex::new(&lock_order::READ_FAILURES, HashSet::new()))
    }
}

impl ReadFailures {
    /// The device failed to read page `p`: true if that is its first failure.
    pub fn first(&self, p: u32) -> bool {
        self.0.lock().insert(p)
    }

    /// The pages were read (or discarded): earlier failures no longer count.
    pub fn forget(&self, pages: impl Iterator<Item = u32>) {
        let mut failed = self.0.lock();
        if !failed.is_empty() {
            for p in pages {
                failed.remove(&p);
            }
        }
    }
}
