//! A region's statistics at one moment, as the C functions give them: the engine's
//! kernel-named ones (`Zswap::stats`), the region's own (`Region::stats`), then where its
//! memory is, with the names `uzswap run --stats` prints.

use region::{Region, RegionStatsSnapshot};
use zswap::stats::StatsSnapshot;

/// One copy of every statistic of a region.
pub(crate) struct Snapshot {
    zswap: StatsSnapshot,
    region: RegionStatsSnapshot,
    usage: [(&'static str, u64); 5],
}

impl Snapshot {
    pub fn of(region: &Region) -> Self {
        let usage = region.usage();
        Snapshot {
            zswap: region.zswap().stats(),
            region: region.stats(),
            usage: [
                ("region_resident_bytes", usage.resident),
                ("region_staged_bytes", usage.staged),
                ("region_pool_bytes", usage.pool),
                ("region_metadata_bytes", usage.metadata),
                ("memory_limit_bytes", region.limit()),
            ],
        }
    }

    /// `name value` lines, like /proc/vmstat: the engine's, the region's (with
    /// `pages_per_fault`, the one that is not a whole number), then the usage.
    pub fn text(&self) -> String {
        let mut text = format!("{}{}", self.zswap, self.region);
        for (name, value) in self.usage {
            text.push_str(&format!("{name} {value}\n"));
        }
        text
    }

    /// One JSON object, every name of `text` to its value.
    pub fn json(&self) -> String {
        let mut map = match (self.zswap.to_json(), self.region.to_json()) {
            (serde_json::Value::Object(mut zswap), serde_json::Value::Object(region)) => {
                zswap.extend(region);
                zswap
            }
            _ => unreachable!("both snapshots are JSON objects"),
        };
        map.extend(self.usage.map(|(n, v)| (n.to_string(), v.into())));
        serde_json::Value::Object(map).to_string()
    }

    /// A statistic that is a whole number, by name.
    pub fn get(&self, name: &str) -> Option<u64> {
        let zswap = self.zswap.lines.iter().map(|(n, v)| (n.as_str(), *v));
        zswap
            .chain(self.region.lines())
            .chain(self.usage)
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v)
    }
}
