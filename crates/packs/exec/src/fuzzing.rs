//! Hooks for the fuzz targets in `fuzz/` (cargo feature `fuzzing`, off by
//! default): the tools' argument parsers, which are private otherwise. Not
//! an API: hidden from the docs, and nothing but the fuzz targets may use it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::jail::{Base, Jail, Limits, Users};
use super::language::{Interpreter, Language, SPECS};
use super::sandbox::Isolation;
use super::tools::{ExecuteCode, ValidateCode};
use super::{ExecConfig, ExecPack, Shared};

/// A pack that has every language it knows, without looking at this
/// machine (as the schema agreement tests build it), so that the parsers
/// see every language whatever is installed here. Its base directory goes
/// under `work_dir`. Nothing can be run with it.
pub fn pack_with_every_language(work_dir: &Path, max_timeout: Duration) -> ExecPack {
    let limits = Limits {
        memory_bytes: 1 << 20,
        run_memory_bytes: 1 << 20,
        processes: 1,
        file_bytes: 1 << 20,
        workdir_bytes: 1 << 20,
        open_files: 16,
    };
    let jail = Jail::new(
        Isolation::None {
            reason: "a fuzz target".into(),
        },
        Users::Own {
            uid: rustix::process::getuid().as_raw(),
        },
        Base::open(work_dir, false).expect("a base directory under the fuzz target's own"),
        weir_proc::Cgroups::none("a fuzz target"),
        limits,
    );
    let languages = SPECS
        .iter()
        .map(|spec| Language {
            spec,
            found: Ok(Interpreter {
                path: PathBuf::from("/usr/bin").join(spec.executables[0]),
                version: None,
            }),
        })
        .collect();
    ExecPack {
        pack: Arc::new(Shared {
            jail,
            languages,
            config: ExecConfig {
                max_timeout,
                work_dir: work_dir.to_owned(),
                ..ExecConfig::default()
            },
        }),
    }
}

/// What `execute_code`'s parser accepted: what the fuzz targets check
/// against the schema's promises.
#[derive(Debug)]
pub struct Accepted {
    /// The wall-clock limit.
    pub timeout: Duration,
    /// The environment the program gets from the caller.
    pub env: Vec<(String, String)>,
    /// The files written before the program starts, relative to its
    /// directory.
    pub files: Vec<PathBuf>,
    /// The file the code itself goes to.
    pub main_file: &'static str,
}

/// `execute_code`'s parser (`ExecuteCode::arguments`); `Err` is the message
/// the caller would get.
pub fn execute_arguments(pack: &ExecPack, arguments: Value) -> Result<Accepted, String> {
    let tool = ExecuteCode(pack.pack.clone());
    let call = tool.arguments(arguments).map_err(|error| error.message)?;
    let main_file = pack
        .pack
        .language(&call.language)
        .map_err(|error| error.message)?
        .spec
        .file;
    Ok(Accepted {
        timeout: call.timeout,
        env: call.env,
        files: call.files.into_iter().map(|(path, _)| path).collect(),
        main_file,
    })
}

/// `validate_code`'s parser (`ValidateCode::arguments`).
pub fn validate_arguments(pack: &ExecPack, arguments: Value) -> Result<(), String> {
    ValidateCode(pack.pack.clone())
        .arguments(arguments)
        .map(drop)
        .map_err(|error| error.message)
}
