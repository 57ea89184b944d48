//! What an upstream's result repeats of its partial results.
//!
//! A server that streams partial results and then answers with a result
//! complete by itself (weir's own servers do, as does any server that
//! cannot count on its client having seen the stream) repeats each
//! streamed block in its result. A run's final result is its partials
//! followed by its tool's result, so a wrapped call's result would carry
//! each of those blocks twice, and a model reading it would see every item
//! twice. [`StreamedBlocks`] remembers what the partials carried, and
//! [`StreamedBlocks::strip_repeated`] drops the leading blocks of the
//! result that are the same, in the same order. A result that does not
//! begin with them (a server that sends only the rest at the end) is kept
//! whole; one that repeats only the first few (its own output cut short)
//! loses those few.

use std::hash::{DefaultHasher, Hash, Hasher};

use weir_core::Content;

/// How many partial blocks are remembered, at 8 bytes each (512 KiB). As
/// JSON a block takes at least 26 bytes, so more than this fill 1.7 MB,
/// beyond a result's limit unless an operator raises it that far; the
/// blocks of a larger stream are not compared.
const REMEMBERED: usize = 1 << 16;

/// The blocks a call's partial results carried so far, as hashes, in order.
#[derive(Debug, Default)]
pub(crate) struct StreamedBlocks {
    hashes: Vec<u64>,
}

impl StreamedBlocks {
    /// A partial result's blocks, after those before.
    pub(crate) fn saw(&mut self, blocks: &[Content]) {
        let room = REMEMBERED - self.hashes.len();
        self.hashes
            .extend(blocks.iter().take(room).map(fingerprint));
    }

    /// Drops the leading blocks of `content` that the partials carried,
    /// in order: the result then holds only what they did not.
    pub(crate) fn strip_repeated(&self, content: &mut Vec<Content>) {
        let repeated = content
            .iter()
            .zip(&self.hashes)
            .take_while(|(block, streamed)| fingerprint(block) == **streamed)
            .count();
        content.drain(..repeated);
    }
}

/// A block's hash: 64 bits, so two different blocks at the same place
/// look alike once in 2^64.
fn fingerprint(block: &Content) -> u64 {
    let mut hasher = DefaultHasher::new();
    block.hash(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocks(texts: &[&str]) -> Vec<Content> {
        texts.iter().map(|text| Content::text(*text)).collect()
    }

    fn stripped(streamed: &[&[&str]], result: &[&str]) -> Vec<Content> {
        let mut seen = StreamedBlocks::default();
        for partial in streamed {
            seen.saw(&blocks(partial));
        }
        let mut content = blocks(result);
        seen.strip_repeated(&mut content);
        content
    }

    #[test]
    fn a_result_that_repeats_the_stream_keeps_only_the_rest() {
        assert_eq!(
            stripped(&[&["a", "b"], &["c"]], &["a", "b", "c", "streamed 3"]),
            blocks(&["streamed 3"])
        );
    }

    #[test]
    fn a_result_that_does_not_begin_with_the_stream_is_kept_whole() {
        assert_eq!(stripped(&[&["a", "b"]], &["done"]), blocks(&["done"]));
        assert_eq!(stripped(&[&["a", "b"]], &["b", "a"]), blocks(&["b", "a"]));
        assert_eq!(stripped(&[], &["a"]), blocks(&["a"]));
    }

    #[test]
    fn only_the_repeated_beginning_goes() {
        // Its output cut short: the first block, then a note.
        assert_eq!(
            stripped(&[&["a", "b", "c"]], &["a", "[cut]"]),
            blocks(&["[cut]"])
        );
        // A block repeated beyond the stream stays.
        assert_eq!(stripped(&[&["a"]], &["a", "a"]), blocks(&["a"]));
    }

    #[test]
    fn blocks_of_another_kind_are_compared_whole() {
        let link = |uri: &str| Content::ResourceLink {
            uri: uri.into(),
            name: "n".into(),
            mime_type: None,
        };
        let mut seen = StreamedBlocks::default();
        seen.saw(&[link("x://1")]);
        let mut content = vec![link("x://2"), Content::text("t")];
        seen.strip_repeated(&mut content);
        assert_eq!(content.len(), 2);
        let mut content = vec![link("x://1"), Content::text("t")];
        seen.strip_repeated(&mut content);
        assert_eq!(content, vec![Content::text("t")]);
    }
}
