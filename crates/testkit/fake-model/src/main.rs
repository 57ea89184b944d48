//! `weir-fake-model --script FILE [--port N]`: serves a script by hand.
//! Prints the URL on stdout (one line, for scripts to read), then one line
//! per request on stderr, until interrupted.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;

use weir_fake_model::{FakeModel, Script};

const USAGE: &str = "usage: weir-fake-model --script FILE [--port N]
Serves FILE's turns (JSON: {\"turns\": [{\"type\": \"text\", \"text\": \"Hi\"}, ...]}) as the
Anthropic Messages, OpenAI Responses, OpenAI Chat Completions and Gemini APIs on
127.0.0.1:N (default: any free port), prints the URL, and logs each request.";

fn main() -> ExitCode {
    let (script, port) = match parse(std::env::args().skip(1)) {
        Ok(Some(args)) => args,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("weir-fake-model: {message}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("weir-fake-model: cannot start a tokio runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async {
        let script = match Script::from_file(&script) {
            Ok(script) => script,
            Err(error) => {
                eprintln!("{error}");
                return ExitCode::FAILURE;
            }
        };
        let turns = script.turns.len();
        let fake = match FakeModel::bind(script, SocketAddr::from((Ipv4Addr::LOCALHOST, port))) {
            Ok(fake) => fake,
            Err(error) => {
                eprintln!("{error}");
                return ExitCode::FAILURE;
            }
        };
        println!("{}", fake.url());
        eprintln!("weir-fake-model: {turns} turn(s); Ctrl-C to stop");
        let log = async {
            let mut seen = 0;
            loop {
                let requests = fake.wait_for_requests(seen + 1).await;
                for request in &requests[seen..] {
                    let turn = request
                        .turn
                        .map_or_else(|| "no turn".to_owned(), |turn| format!("turn {turn}"));
                    eprintln!("{} {} -> {turn}", request.method, request.path);
                }
                seen = requests.len();
            }
        };
        tokio::select! {
            () = log => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        fake.shutdown().await;
        ExitCode::SUCCESS
    })
}

/// `Ok(None)`: help was asked for.
fn parse(mut args: impl Iterator<Item = String>) -> Result<Option<(PathBuf, u16)>, String> {
    let (mut script, mut port) = (None, 0);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--script" => script = Some(args.next().ok_or("--script needs a FILE")?.into()),
            "--port" => {
                let value = args.next().ok_or("--port needs a number")?;
                port = value
                    .parse()
                    .map_err(|_| format!("--port {value}: not a port number"))?;
            }
            "-h" | "--help" => return Ok(None),
            other => return Err(format!("unexpected argument {other}")),
        }
    }
    Ok(Some((script.ok_or("--script FILE is required")?, port)))
}
