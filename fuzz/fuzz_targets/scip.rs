//! The code intelligence pack's `index.scip` reader (weir-pack-codeintel,
//! through its `fuzzing` feature), as `index_repo` feeds it a repository's
//! file: protobuf bytes its author controls, read against a scratch
//! repository holding an ASCII file, a file of wide characters, and
//! symlinks out of the repository (to a file and to a directory).
//!
//! Properties: no panic; every document kept is a relative path inside the
//! repository (no `..`, not absolute, not a symlink out), each dropped one
//! is said with why; every occurrence is in a kept document, with lines and
//! columns from 1 and names a symbol that exists.
#![no_main]

use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;

/// The scratch repository, made once: `repo/` with `a.rs`, `wide.rs`,
/// `out.rs` (a symlink to `../secret.rs`) and `dir/` (a symlink to `..`).
fn repo() -> &'static (PathBuf, PathBuf) {
    static REPO: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    REPO.get_or_init(|| {
        let base = std::env::temp_dir().join(format!("weir-fuzz-scip-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let repo = base.join("repo");
        std::fs::create_dir_all(&repo).unwrap();
        std::fs::write(base.join("secret.rs"), "pub fn secret() {}\n").unwrap();
        std::fs::write(
            repo.join("a.rs"),
            "pub fn area() -> u32 {\n    add(1, 2)\n}\n",
        )
        .unwrap();
        std::fs::write(
            repo.join("wide.rs"),
            "let s = \"π ≈ ∑\"; f(c.area());\n\u{1F600} x\n",
        )
        .unwrap();
        std::os::unix::fs::symlink(base.join("secret.rs"), repo.join("out.rs")).unwrap();
        std::os::unix::fs::symlink(&base, repo.join("dir")).unwrap();
        let repo = std::fs::canonicalize(repo).unwrap();
        let base = std::fs::canonicalize(base).unwrap();
        (base, repo)
    })
}

fuzz_target!(|data: &[u8]| {
    let (_, root) = repo();
    let Some(decoded) = weir_pack_codeintel::fuzzing::scip(data, root) else {
        return;
    };
    for document in &decoded.documents {
        let path = Path::new(document);
        assert!(!path.is_absolute(), "kept an absolute path {document:?}");
        assert!(
            path.components()
                .all(|c| matches!(c, Component::Normal(_) | Component::CurDir)),
            "kept a path that leaves the repository {document:?}"
        );
        if let Ok(resolved) = std::fs::canonicalize(root.join(path)) {
            assert!(
                resolved.starts_with(root),
                "kept {document:?}, which resolves to {resolved:?}"
            );
        }
    }
    for dropped in &decoded.dropped {
        assert!(dropped.contains("dropped, never read"), "{dropped}");
    }
    for (path, line, column, end_line, end_column) in &decoded.occurrences {
        assert!(
            decoded.documents.contains(path),
            "an occurrence in {path:?}, no document"
        );
        assert!(*line >= 1 && *column >= 1 && *end_line >= 1 && *end_column >= 1);
    }
});
