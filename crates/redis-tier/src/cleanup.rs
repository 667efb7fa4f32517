//! Deleting a run's keys from outside it: `uzswap run` does this once its program has ended,
//! however it ended, so that nothing waits for a lease to run out.

use std::time::Duration;

use redis::Value;

use crate::{cluster_client, RedisTierError};

/// Delete every key of the runs whose ids start with `run` (`uzswap:RUN*`) from every
/// primary of the cluster at `address`. Returns the keys deleted.
pub fn delete_run(address: &str, run: &str) -> Result<u64, RedisTierError> {
    let client = cluster_client(address)?;
    let unreachable = |source| RedisTierError::Unreachable {
        nodes: address.to_string(),
        source,
    };
    let mut conn = client.get_connection().map_err(unreachable)?;
    // The primaries, from the slot map: SCAN runs on one node at a time.
    let slots: Value = redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query(&mut conn)
        .map_err(unreachable)?;
    let mut primaries = Vec::new();
    if let Value::Array(ranges) = slots {
        for range in ranges {
            if let Value::Array(parts) = range {
                if let Some(Value::Array(primary)) = parts.get(2) {
                    if let (Some(Value::BulkString(host)), Some(Value::Int(port))) =
                        (primary.first(), primary.get(1))
                    {
                        let node = format!("redis://{}:{port}/", String::from_utf8_lossy(host));
                        if !primaries.contains(&node) {
                            primaries.push(node);
                        }
                    }
                }
            }
        }
    }
    let pattern = format!("uzswap:{run}*");
    let mut deleted = 0;
    for node in primaries {
        let client = redis::Client::open(node.as_str()).map_err(unreachable)?;
        let mut c = client
            .get_connection_with_timeout(Duration::from_secs(2))
            .map_err(unreachable)?;
        let mut cursor = 0u64;
        loop {
            let (next, keys): (u64, Vec<Vec<u8>>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(1000)
                .query(&mut c)
                .map_err(unreachable)?;
            if !keys.is_empty() {
                // One UNLINK a key: keys of different hash slots cannot share a command.
                let mut pipe = redis::pipe();
                for key in &keys {
                    pipe.cmd("UNLINK").arg(key);
                }
                let n: Vec<u64> = pipe.query(&mut c).map_err(unreachable)?;
                deleted += n.iter().sum::<u64>();
            }
            cursor = next;
            if cursor == 0 {
                break;
            }
        }
    }
    Ok(deleted)
}
