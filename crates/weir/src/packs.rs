//! The tool packs this build registers: one function per pack, each behind
//! the cargo feature of the same name (all on by default).
//!
//! | feature | pack | tools | `weir serve` options |
//! |---|---|---|---|
//! | `exec` | `weir-pack-exec` | `execute_code`, `validate_code`, `list_languages` | `--no-exec`, `--exec-sandbox` |
//! | (always) | `weir-fixtures`, with `--fixtures` only | the conformance suite's tools and `stream` | `--fixtures` |

use std::path::Path;

use weir_runtime::Pack;

use crate::cli::ServeArgs;

/// The packs `args` asks for, built (each may probe the machine first).
/// `data_dir` holds the runs' store: no pack may let a run see it.
#[cfg_attr(not(feature = "exec"), allow(unused_variables))]
pub(crate) async fn enabled(
    args: &ServeArgs,
    data_dir: &Path,
) -> anyhow::Result<Vec<Box<dyn Pack>>> {
    let mut packs: Vec<Box<dyn Pack>> = Vec::new();
    if args.fixtures {
        packs.push(Box::new(weir_fixtures::FixturesPack));
    }
    #[cfg(feature = "exec")]
    if !args.exec.no_exec {
        packs.push(Box::new(exec(&args.exec, data_dir).await?));
    }
    Ok(packs)
}

#[cfg(feature = "exec")]
async fn exec(
    args: &crate::cli::ExecArgs,
    data_dir: &Path,
) -> anyhow::Result<weir_pack_exec::ExecPack> {
    use anyhow::Context as _;
    weir_pack_exec::ExecPack::detect(weir_pack_exec::ExecConfig {
        sandbox: args.exec_sandbox,
        // The sandbox shows only system directories; should the data
        // directory be inside one (say /opt/weir), it is masked there.
        hidden: vec![data_dir.to_owned()],
        ..weir_pack_exec::ExecConfig::default()
    })
    .await
    .context("starting the code execution tools (--no-exec leaves them out)")
}
