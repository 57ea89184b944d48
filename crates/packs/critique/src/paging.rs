//! Pages of a long report, and the cursor that names the next one.
//!
//! Offsets count bytes of the report's UTF-8 text; a page never splits a
//! character (an offset inside one moves back to its start, a page's end
//! too), so pages joined in order are the report exactly.

use serde::Serialize;

/// One page of a report.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct Page {
    /// Where this page starts.
    pub(crate) offset: usize,
    /// The page's text.
    pub(crate) text: String,
    /// Where the next page starts; `None` at the end.
    pub(crate) next_offset: Option<usize>,
    /// The report's whole length.
    pub(crate) total: usize,
}

/// The page of `text` from `offset`, at most `limit` bytes (at least one
/// character, so paging always moves on).
pub(crate) fn page(text: &str, offset: usize, limit: usize) -> Page {
    let start = floor_boundary(text, offset.min(text.len()));
    let mut end = floor_boundary(text, start.saturating_add(limit).min(text.len()));
    if end == start && start < text.len() {
        // A limit smaller than the character here: take the character.
        end = start + text[start..].chars().next().map_or(0, char::len_utf8);
    }
    Page {
        offset: start,
        text: text[start..end].to_owned(),
        next_offset: (end < text.len()).then_some(end),
        total: text.len(),
    }
}

fn floor_boundary(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// A cursor: the report and where its next page starts, as one opaque
/// string (`{context_id}@{offset}`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Cursor {
    pub(crate) context_id: String,
    pub(crate) offset: usize,
}

impl Cursor {
    pub(crate) fn encode(&self) -> String {
        format!("{}@{}", self.context_id, self.offset)
    }

    /// Reads a cursor made by [`Cursor::encode`]; the error says what is
    /// wrong with it.
    pub(crate) fn decode(text: &str) -> Result<Cursor, String> {
        let (context_id, offset) = text.rsplit_once('@').ok_or_else(|| {
            format!("cursor {text:?} is not one this server gave out (expected the next_cursor of a roast result)")
        })?;
        let offset = offset
            .parse()
            .map_err(|_| format!("cursor {text:?} has no valid offset after '@'"))?;
        if context_id.is_empty() {
            return Err(format!("cursor {text:?} names no context_id"));
        }
        Ok(Cursor {
            context_id: context_id.to_owned(),
            offset,
        })
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn pages_split_at_characters() {
        let text = "aé€😀b"; // 1 + 2 + 3 + 4 + 1 bytes
        let first = page(text, 0, 2);
        assert_eq!((first.text.as_str(), first.next_offset), ("a", Some(1)));
        let second = page(text, 2, 3); // 2 is inside é: back to 1
        assert_eq!((second.offset, second.text.as_str()), (1, "é"));
        let tiny = page(text, 6, 1); // 😀 is wider than the limit: taken whole
        assert_eq!((tiny.text.as_str(), tiny.next_offset), ("😀", Some(10)));
        let past = page(text, 99, 5);
        assert_eq!(
            (past.text.as_str(), past.next_offset, past.total),
            ("", None, 11)
        );
    }

    #[test]
    fn cursors_round_trip_and_bad_ones_are_named() {
        let cursor = Cursor {
            context_id: "0199-abc".into(),
            offset: 4096,
        };
        assert_eq!(Cursor::decode(&cursor.encode()), Ok(cursor));
        assert!(
            Cursor::decode("nope")
                .unwrap_err()
                .contains("not one this server gave out")
        );
        assert!(
            Cursor::decode("x@y")
                .unwrap_err()
                .contains("no valid offset")
        );
    }

    proptest! {
        /// Following next_offset from 0 gives the text back exactly.
        #[test]
        fn pages_join_to_the_text(text in "\\PC{0,200}", limit in 1usize..50) {
            let mut joined = String::new();
            let mut offset = Some(0);
            let mut pages = 0;
            while let Some(at) = offset {
                let page = page(&text, at, limit);
                prop_assert!(page.text.len() <= limit.max(4));
                joined.push_str(&page.text);
                offset = page.next_offset;
                pages += 1;
                prop_assert!(pages <= text.len() + 1);
            }
            prop_assert_eq!(joined, text);
        }
    }
}
