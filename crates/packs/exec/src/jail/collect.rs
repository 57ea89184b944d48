//! A short program run to its end with its output kept: interpreter probes,
//! the sandbox probe, syntax checks.

use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::Duration;

use super::{Jail, JailError, Launch};

/// What a program run to its end produced.
#[derive(Debug)]
pub(crate) struct Collected {
    pub(crate) status: ExitStatus,
    /// stdout and stderr, merged in the order read, cut at the limit.
    pub(crate) output: Vec<u8>,
    pub(crate) timed_out: bool,
}

impl Jail {
    /// Runs `launch` to its end in a fresh cell holding `files`, with both
    /// outputs merged and kept up to `max_bytes`; kills it after `timeout`.
    pub(crate) async fn run_collected(
        &self,
        name: &str,
        launch: Launch,
        files: &[(PathBuf, Vec<u8>)],
        timeout: Duration,
        max_bytes: usize,
    ) -> Result<Collected, JailError> {
        let mut cell = self.cell(name)?;
        for (path, bytes) in files {
            cell.write(path, bytes)?;
        }
        let (mut running, mut chunks) = self.spawn(cell, launch, timeout)?;
        running.feed_stdin();
        let mut output = Vec::new();
        let mut open = 2;
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut timed_out = false;
        let status = loop {
            tokio::select! {
                chunk = chunks.recv(), if open > 0 => match chunk {
                    Some((_, Some(bytes))) => {
                        let room = max_bytes.saturating_sub(output.len());
                        output.extend_from_slice(&bytes[..bytes.len().min(room)]);
                    }
                    Some((_, None)) => open -= 1,
                    None => open = 0,
                },
                status = running.wait(), if open == 0 => break status,
                () = &mut deadline, if !timed_out => {
                    timed_out = true;
                    running.kill();
                }
            }
        };
        let status = status.map_err(|source| JailError::Spawn {
            program: running.program_name(),
            source,
        })?;
        running.kill(); // anything it left running
        Ok(Collected {
            status,
            output,
            timed_out,
        })
    }
}
