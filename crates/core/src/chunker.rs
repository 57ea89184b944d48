//! Cutting a stream of structured items into `partial`-sized chunks.
//!
//! A chunk closes when one more item would exceed the item count or the
//! encoded size (the JSON array's bytes), or when the logical group (a file, a
//! module) changes, so a client never gets half a group glued to the next.

use serde_json::Value;

/// When a chunk is full.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkLimits {
    /// Most items in one chunk.
    pub max_items: usize,
    /// Most bytes of the chunk's items encoded as a JSON array. One item larger
    /// than this travels alone in a chunk of its own.
    pub max_bytes: usize,
}

impl Default for ChunkLimits {
    /// 256 items or 16 KiB, whichever comes first.
    fn default() -> Self {
        ChunkLimits {
            max_items: 256,
            max_bytes: 16 * 1024,
        }
    }
}

/// A run of items of one group, within the limits.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Chunk {
    /// The group every item belongs to.
    pub group: Option<String>,
    /// The items, in order.
    pub items: Vec<Value>,
    /// Length of `items` encoded as a JSON array.
    pub bytes: usize,
}

/// Accumulates items and hands out full chunks.
///
/// ```
/// use serde_json::json;
/// use weir_core::{ChunkLimits, Chunker};
/// let mut chunker = Chunker::new(ChunkLimits { max_items: 2, max_bytes: 1024 });
/// assert!(chunker.push(json!(1), Some("a.rs")).is_none());
/// assert!(chunker.push(json!(2), Some("a.rs")).is_none());
/// let full = chunker.push(json!(3), Some("a.rs")).unwrap(); // count limit
/// assert_eq!(full.items, vec![json!(1), json!(2)]);
/// let by_group = chunker.push(json!(4), Some("b.rs")).unwrap(); // group changed
/// assert_eq!(by_group.items, vec![json!(3)]);
/// assert_eq!(chunker.finish().unwrap().group.as_deref(), Some("b.rs"));
/// ```
#[derive(Debug)]
pub struct Chunker {
    limits: ChunkLimits,
    current: Chunk,
}

impl Chunker {
    /// An empty chunker. Limits of zero are raised to one item and one byte.
    pub fn new(limits: ChunkLimits) -> Chunker {
        Chunker {
            limits: ChunkLimits {
                max_items: limits.max_items.max(1),
                max_bytes: limits.max_bytes.max(1),
            },
            current: Chunk::default(),
        }
    }

    /// Adds `item` of `group`; returns the chunk it closed, if any.
    pub fn push(&mut self, item: Value, group: Option<&str>) -> Option<Chunk> {
        let item_bytes = encoded_len(&item);
        let current = &self.current;
        // `[` `]` once, and a comma between items.
        let bytes_with_item = if current.items.is_empty() {
            2 + item_bytes
        } else {
            current.bytes + 1 + item_bytes
        };
        let closes = !current.items.is_empty()
            && (current.group.as_deref() != group
                || current.items.len() >= self.limits.max_items
                || bytes_with_item > self.limits.max_bytes);
        let closed = closes.then(|| std::mem::take(&mut self.current));
        if self.current.items.is_empty() {
            self.current.group = group.map(str::to_owned);
            self.current.bytes = 2 + item_bytes;
        } else {
            self.current.bytes += 1 + item_bytes;
        }
        self.current.items.push(item);
        closed
    }

    /// The last, partly filled chunk, if any.
    pub fn finish(self) -> Option<Chunk> {
        (!self.current.items.is_empty()).then_some(self.current)
    }
}

/// Bytes of `value` as compact JSON, counted without allocating.
fn encoded_len(value: &Value) -> usize {
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    serde_json::to_writer(&mut counter, value).expect("a Value always serializes");
    counter.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn chunk_all(items: &[(Value, Option<String>)], limits: ChunkLimits) -> Vec<Chunk> {
        let mut chunker = Chunker::new(limits);
        let mut chunks: Vec<Chunk> = items
            .iter()
            .filter_map(|(item, group)| chunker.push(item.clone(), group.as_deref()))
            .collect();
        chunks.extend(chunker.finish());
        chunks
    }

    #[test]
    fn byte_limit_counts_the_json_array() {
        // "aaaa" is 6 bytes; two of them in an array: ["aaaa","aaaa"] = 15.
        let items = vec![(json!("aaaa"), None), (json!("aaaa"), None)];
        let fits = chunk_all(
            &items,
            ChunkLimits {
                max_items: 10,
                max_bytes: 15,
            },
        );
        assert_eq!(fits.len(), 1);
        assert_eq!(
            fits[0].bytes,
            serde_json::to_vec(&fits[0].items).unwrap().len()
        );
        let split = chunk_all(
            &items,
            ChunkLimits {
                max_items: 10,
                max_bytes: 14,
            },
        );
        assert_eq!(split.len(), 2);
    }

    #[test]
    fn an_oversized_item_travels_alone() {
        let big = json!("x".repeat(100));
        let items = vec![(json!(1), None), (big.clone(), None), (json!(2), None)];
        let chunks = chunk_all(
            &items,
            ChunkLimits {
                max_items: 10,
                max_bytes: 20,
            },
        );
        let sizes: Vec<usize> = chunks.iter().map(|c| c.items.len()).collect();
        assert_eq!(sizes, vec![1, 1, 1]);
        assert_eq!(chunks[1].items, vec![big]);
    }

    proptest! {
        /// Chunks keep every item in order, respect both limits (but for a
        /// lone oversized item), never mix groups, and report their size.
        #[test]
        fn chunks_are_lossless_and_bounded(
            items in prop::collection::vec(
                ("[a-z]{0,40}", prop::option::of("[ab]")), 0..200),
            max_items in 1usize..20,
            max_bytes in 1usize..200,
        ) {
            let items: Vec<(Value, Option<String>)> =
                items.into_iter().map(|(s, g)| (json!(s), g)).collect();
            let limits = ChunkLimits { max_items, max_bytes };
            let chunks = chunk_all(&items, limits);
            let flat: Vec<(Value, Option<String>)> = chunks
                .iter()
                .flat_map(|c| c.items.iter().map(|i| (i.clone(), c.group.clone())))
                .collect();
            prop_assert_eq!(flat, items);
            for chunk in &chunks {
                prop_assert!(!chunk.items.is_empty());
                prop_assert!(chunk.items.len() <= max_items);
                prop_assert_eq!(chunk.bytes, serde_json::to_vec(&chunk.items).unwrap().len());
                prop_assert!(chunk.bytes <= max_bytes || chunk.items.len() == 1);
            }
        }
    }
}
