//! Hidden entry points for the fuzz targets in fuzz/ (the `fuzzing`
//! feature); not an API.

use std::path::Path;

/// What an `index.scip` decoded to: the documents kept, those dropped (with
/// why), and every occurrence as `(document, line, column, end line, end
/// column)`, lines and columns from 1.
#[derive(Debug, Default)]
pub struct ScipDecoded {
    /// Documents kept: each a file inside the repository.
    pub documents: Vec<String>,
    /// Documents dropped, each a warning.
    pub dropped: Vec<String>,
    /// The occurrences kept.
    pub occurrences: Vec<(String, u32, u32, u32, u32)>,
    /// Symbols interned, and how many of them name an occurrence.
    pub symbols: usize,
}

/// Decodes `bytes` as the `index.scip` of the repository at `root` (whose
/// files give local symbols' names and byte columns), as the indexer does;
/// `None` when it is not a SCIP index.
pub fn scip(bytes: &[u8], root: &Path) -> Option<ScipDecoded> {
    let index = crate::scip::decode(bytes, root).ok()?;
    let symbols = index.symbols.len();
    for occurrence in &index.occurrences {
        assert!(occurrence.symbol < symbols, "an occurrence names no symbol");
    }
    Some(ScipDecoded {
        occurrences: index
            .occurrences
            .into_iter()
            .map(|o| (o.path, o.line, o.column, o.end_line, o.end_column))
            .collect(),
        documents: index.documents,
        dropped: index.dropped,
        symbols,
    })
}
