//! The replicas a client throttle knows, one per authority, in a bounded map.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::uri::Authority;
use parking_lot::{Mutex, RwLock};

use super::replica::Replica;

/// The most authorities one throttle keeps state for: memory stays bounded
/// whatever the URIs. When full, replicas whose state no longer counts make
/// room; a new authority finding no room is sent to without judgement.
const MAX_REPLICAS: usize = 1024;

/// Requests without an authority in their URI (a tonic `Channel` adds its
/// own below the layer) share the state of this key.
pub(super) type ReplicaKey = Option<Authority>;

#[derive(Debug, Default)]
pub(super) struct Replicas {
    map: RwLock<HashMap<ReplicaKey, Arc<Mutex<Replica>>>>,
}

impl Replicas {
    /// The state of the replica at `key`, made if new (`None` when the map
    /// is full of replicas whose state still counts).
    pub(super) fn get(
        &self,
        key: &ReplicaKey,
        now: Instant,
        window: Duration,
    ) -> Option<Arc<Mutex<Replica>>> {
        if let Some(replica) = self.map.read().get(key) {
            return Some(Arc::clone(replica));
        }
        let mut map = self.map.write();
        if map.len() >= MAX_REPLICAS && !map.contains_key(key) {
            map.retain(|_, replica| !replica.lock().is_stale(now, window));
            if map.len() >= MAX_REPLICAS {
                return None;
            }
        }
        let replica = map
            .entry(key.clone())
            .or_insert_with(|| Arc::new(Mutex::new(Replica::new(window, now))));
        Some(Arc::clone(replica))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: usize) -> ReplicaKey {
        Some(Authority::try_from(format!("10.0.0.{}:{}", n % 250, 1_000 + n / 250)).unwrap())
    }

    #[test]
    fn one_authority_has_one_state() {
        let replicas = Replicas::default();
        let now = Instant::now();
        let window = Duration::from_secs(1);
        let a = replicas.get(&key(1), now, window).unwrap();
        let b = replicas.get(&key(1), now, window).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(
            &a,
            &replicas.get(&key(2), now, window).unwrap()
        ));
    }

    #[test]
    fn the_map_is_bounded_and_forgets_stale_replicas() {
        let replicas = Replicas::default();
        let now = Instant::now();
        let window = Duration::from_secs(1);
        for n in 0..MAX_REPLICAS {
            let replica = replicas.get(&key(n), now, window).unwrap();
            replica.lock().sent(now);
        }
        assert!(replicas.get(&key(MAX_REPLICAS), now, window).is_none());
        let later = now + window;
        assert!(replicas.get(&key(MAX_REPLICAS), later, window).is_some());
        assert!(replicas.map.read().len() <= MAX_REPLICAS);
    }
}
