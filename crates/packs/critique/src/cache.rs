//! A bounded map whose entries expire: the roast cache (keyed by a hash of
//! a call's canonical arguments) and the report store (keyed by context
//! id). Pure: time comes in as milliseconds.

use std::collections::HashMap;

use serde_json::Value;
use sha2::{Digest, Sha256};

/// Entries that expire `ttl_ms` after they were stored; at most `capacity`,
/// the oldest going first.
#[derive(Debug)]
pub(crate) struct TtlCache<V> {
    ttl_ms: u64,
    capacity: usize,
    /// key → (stored at, value).
    entries: HashMap<String, (u64, V)>,
}

impl<V: Clone> TtlCache<V> {
    pub(crate) fn new(ttl_ms: u64, capacity: usize) -> TtlCache<V> {
        TtlCache {
            ttl_ms,
            capacity: capacity.max(1),
            entries: HashMap::new(),
        }
    }

    /// The value under `key`, unless it has expired by `now_ms` (then it
    /// is dropped).
    pub(crate) fn get(&mut self, key: &str, now_ms: u64) -> Option<V> {
        let (stored, value) = self.entries.get(key)?;
        if now_ms.saturating_sub(*stored) >= self.ttl_ms {
            self.entries.remove(key);
            return None;
        }
        Some(value.clone())
    }

    /// Stores `value` under `key` as of `now_ms`, dropping expired entries
    /// and, past the capacity, the oldest.
    pub(crate) fn put(&mut self, key: String, value: V, now_ms: u64) {
        let ttl = self.ttl_ms;
        self.entries
            .retain(|_, (stored, _)| now_ms.saturating_sub(*stored) < ttl);
        self.entries.insert(key, (now_ms, value));
        while self.entries.len() > self.capacity {
            let oldest = self
                .entries
                .iter()
                .min_by_key(|(key, (stored, _))| (*stored, (*key).clone()))
                .map(|(key, _)| key.clone())
                .expect("over capacity, so not empty");
            self.entries.remove(&oldest);
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

/// The hex SHA-256 of `value`'s canonical JSON: object keys sorted at every
/// level, no whitespace, so that two spellings of the same arguments (key
/// order, spacing) share a key.
pub(crate) fn canonical_hash(value: &Value) -> String {
    let mut text = String::new();
    canonical(value, &mut text);
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

fn canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                canonical(&map[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    #[test]
    fn entries_expire_and_the_oldest_goes_first() {
        let mut cache = TtlCache::new(100, 2);
        cache.put("a".into(), 1, 0);
        cache.put("b".into(), 2, 10);
        assert_eq!(cache.get("a", 99), Some(1));
        assert_eq!(cache.get("a", 100), None); // expired
        cache.put("c".into(), 3, 50);
        cache.put("d".into(), 4, 60); // over capacity: b (the oldest) goes
        assert_eq!(cache.get("b", 61), None);
        assert_eq!((cache.get("c", 61), cache.get("d", 61)), (Some(3), Some(4)));
        assert_eq!(cache.len(), 2);
    }

    #[test]
    fn the_hash_ignores_key_order_and_spacing() {
        let a: Value = serde_json::from_str(r#"{"b": [1, {"y": 2, "x": 1}], "a": "z"}"#).unwrap();
        let b = json!({"a": "z", "b": [1, {"x": 1, "y": 2}]});
        assert_eq!(canonical_hash(&a), canonical_hash(&b));
        assert_ne!(canonical_hash(&a), canonical_hash(&json!({"a": "z"})));
        assert_eq!(canonical_hash(&a).len(), 64);
    }

    proptest! {
        /// A value stored is found until its time is up, never after.
        #[test]
        fn a_value_lives_exactly_its_ttl(ttl in 1u64..1_000, at in 0u64..1_000_000, later in 0u64..2_000) {
            let mut cache = TtlCache::new(ttl, 4);
            cache.put("k".into(), 7, at);
            prop_assert_eq!(cache.get("k", at + later), (later < ttl).then_some(7));
        }
    }
}
