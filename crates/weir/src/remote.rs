//! Talking to an MCP server from the command line: the target from the
//! flags, and the one mapping from client errors to an exit code and a line
//! saying what to do next.

use weir_client::{Client, ClientError, ClientOptions, Revision, StdioCommand, Target};
use weir_core::LogLevel;

use crate::cli::{ProtocolArg, ServerArgs};
use crate::exit::Outcome;

/// Connects to the server the flags name.
pub(crate) async fn connect(server: &ServerArgs) -> Result<Client, ClientError> {
    let target = match (&server.target.stdio, &server.target.url) {
        (Some(command), _) => Target::Stdio(StdioCommand::shell(command)),
        (None, Some(url)) => Target::Http {
            url: url.clone(),
            token: server.token.clone(),
        },
        (None, None) => unreachable!("clap requires --stdio or --url"),
    };
    let options = ClientOptions {
        name: "weir-cli".into(),
        revision: match server.protocol {
            ProtocolArg::Auto => Revision::Negotiate,
            ProtocolArg::Sessions => Revision::Sessions,
            ProtocolArg::Stateless => Revision::Stateless,
        },
        log_level: Some(LogLevel::Info),
        ..ClientOptions::default()
    };
    Client::connect(target, options).await
}

/// How `weir tools` is spelled for this server, for hints.
pub(crate) fn tools_command(server: &ServerArgs) -> String {
    match (&server.target.stdio, &server.target.url) {
        (Some(command), _) => format!("weir tools --stdio {command:?}"),
        (None, Some(url)) => format!("weir tools --url {url}"),
        (None, None) => "weir tools".into(),
    }
}

/// Prints the one line for `error` and says how the command ended:
/// canceled when the call was cancelled or timed out, failed when the tool
/// waited for input, unreachable when the server could not be reached or
/// refused the protocol.
pub(crate) fn report(error: &ClientError, server: &ServerArgs) -> Outcome {
    let (outcome, hint) = match error {
        ClientError::Canceled { .. } => (
            Outcome::Canceled,
            "; the server was told to stop; run the command again to start over".to_owned(),
        ),
        ClientError::Timeout { .. } => (Outcome::Canceled, String::new()),
        ClientError::InputRequired { .. } => (Outcome::Failed, String::new()),
        ClientError::Rpc { .. } => (
            Outcome::Unreachable,
            format!(
                "; see what the server offers with `{}`",
                tools_command(server)
            ),
        ),
        _ => (Outcome::Unreachable, String::new()),
    };
    eprintln!("weir: {error}{hint}");
    outcome
}
