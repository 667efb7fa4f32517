//! Why a region could not be made.

use crate::config::ConfigError;

/// Why a region could not be made.
#[derive(Debug, thiserror::Error)]
pub enum RegionError {
    /// A field of the configuration that the region cannot honour.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The userfaultfd could not be made or set up.
    #[error("userfaultfd")]
    Uffd(#[from] uffd::UffdError),
    /// The region's memory could not be mapped or registered.
    #[error("mapping the region")]
    Map(#[from] uffd::RawRegionError),
    /// The swap file could not be created.
    #[error("swap file")]
    SwapFile(#[from] zswap::swap::DeviceError),
    /// A handler or reclaim thread could not be started.
    #[error("starting the region's threads")]
    Spawn(#[source] std::io::Error),
}

impl RegionError {
    /// The error and its sources on one line, joined by ": " (a source whose message the
    /// line already holds is not repeated).
    pub fn chain(&self) -> String {
        let mut line = self.to_string();
        let mut source = std::error::Error::source(self);
        while let Some(e) = source {
            let text = e.to_string();
            if !line.contains(&text) {
                line.push_str(": ");
                line.push_str(&text);
            }
            source = e.source();
        }
        line
    }
}

/// An error injected at a fail point (the `test-hooks` feature).
#[cfg(feature = "test-hooks")]
pub(crate) fn injected(op: &'static str) -> RegionError {
    RegionError::Uffd(uffd::UffdError::Os {
        op,
        source: std::io::Error::other("injected"),
    })
}
