//! The languages `execute_code` knows, and which of them this machine has.

use std::collections::HashSet;
use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use super::jail::{Collected, Jail, Launch};
use super::sandbox::Isolation;

/// How to run and check one language.
#[derive(Debug)]
pub(crate) struct Spec {
    /// The name callers use, e.g. `python`.
    pub(crate) name: &'static str,
    /// Other names accepted for it.
    pub(crate) aliases: &'static [&'static str],
    /// Executables to look for in `PATH`, best first.
    pub(crate) executables: &'static [&'static str],
    /// The file the code is written to, in the run's directory.
    pub(crate) file: &'static str,
    /// Arguments before the file: unbuffered output where the interpreter
    /// would otherwise hold lines back when writing to a pipe.
    pub(crate) run: &'static [&'static str],
    /// Arguments that print the version (or, for `sh`, just succeed).
    pub(crate) version: &'static [&'static str],
    /// Arguments before the file for a syntax check that does not run it.
    pub(crate) check: &'static [&'static str],
    /// What the check is, for people.
    pub(crate) checker: &'static str,
}

/// Compiles the file without running it; prints only the error.
const PYTHON_CHECK: &str = "import sys, traceback
path = sys.argv[1]
try:
    compile(open(path, 'rb').read(), path, 'exec')
except (SyntaxError, ValueError) as error:
    sys.stderr.write(''.join(traceback.format_exception_only(type(error), error)))
    sys.exit(1)";

/// Ruby holds stdout back on a pipe; this runs the file with both streams
/// synchronous and `$0` set to it, as `ruby main.rb` would.
const RUBY_RUN: &str = "STDOUT.sync = true; STDERR.sync = true; $0 = ARGV.shift; load($0)";

/// Every language weir can run, when its interpreter is installed.
pub(crate) const SPECS: &[Spec] = &[
    Spec {
        name: "python",
        aliases: &["python3", "py"],
        executables: &["python3", "python"],
        file: "main.py",
        run: &["-u"],
        version: &["--version"],
        check: &["-c", PYTHON_CHECK],
        checker: "compile() without running",
    },
    Spec {
        name: "javascript",
        aliases: &["js", "node", "nodejs"],
        executables: &["node", "nodejs"],
        file: "main.js",
        run: &[],
        version: &["--version"],
        check: &["--check"],
        checker: "node --check",
    },
    Spec {
        name: "bash",
        aliases: &[],
        executables: &["bash"],
        file: "main.sh",
        run: &[],
        version: &["-c", "echo $BASH_VERSION"],
        check: &["-n"],
        checker: "bash -n",
    },
    Spec {
        name: "sh",
        aliases: &["shell"],
        executables: &["sh"],
        file: "main.sh",
        run: &[],
        version: &["-c", "exit 0"],
        check: &["-n"],
        checker: "sh -n",
    },
    Spec {
        name: "ruby",
        aliases: &["rb"],
        executables: &["ruby"],
        file: "main.rb",
        run: &["-e", RUBY_RUN],
        version: &["-e", "print RUBY_VERSION"],
        check: &["-c"],
        checker: "ruby -c",
    },
    Spec {
        name: "perl",
        aliases: &["pl"],
        executables: &["perl"],
        file: "main.pl",
        run: &["-MIO::Handle;STDOUT->autoflush(1);STDERR->autoflush(1)"],
        version: &["-e", "print $^V"],
        check: &["-c"],
        checker: "perl -c (runs BEGIN blocks, inside the same limits)",
    },
];

/// A language and what this machine has for it.
#[derive(Clone, Debug)]
pub(crate) struct Language {
    pub(crate) spec: &'static Spec,
    pub(crate) found: Result<Interpreter, String>,
}

/// An interpreter that ran here, as runs will run it.
#[derive(Clone, Debug)]
pub(crate) struct Interpreter {
    pub(crate) path: PathBuf,
    pub(crate) version: Option<String>,
}

impl Language {
    /// Whether `name` means this language.
    pub(crate) fn answers_to(&self, name: &str) -> bool {
        let name = name.to_ascii_lowercase();
        self.spec.name == name || self.spec.aliases.contains(&name.as_str())
    }

    /// The run's command line after the interpreter: its options, the
    /// file, then the caller's arguments.
    pub(crate) fn run_args(&self, args: &[String]) -> Vec<OsString> {
        let spec = self.spec;
        let options = spec.run.iter().chain([&spec.file]);
        options
            .map(OsString::from)
            .chain(args.iter().map(OsString::from))
            .collect()
    }

    /// The syntax check's command line after the interpreter.
    pub(crate) fn check_args(&self) -> Vec<OsString> {
        let spec = self.spec;
        spec.check
            .iter()
            .chain([&spec.file])
            .map(OsString::from)
            .collect()
    }

    /// How `list_languages` describes it.
    pub(crate) fn describe(&self) -> Value {
        let spec = self.spec;
        let mut entry = json!({
            "name": spec.name,
            "aliases": spec.aliases,
            "available": self.found.is_ok(),
            "file": spec.file,
            "syntax_check": spec.checker,
        });
        match &self.found {
            Ok(interpreter) => {
                entry["interpreter"] = interpreter.path.display().to_string().into();
                entry["version"] = interpreter.version.clone().into();
            }
            Err(reason) => entry["reason"] = reason.clone().into(),
        }
        entry
    }
}

/// Finds each language's interpreter: the first executable of its names in
/// `path` (the server's `PATH`) that prints its version when run exactly as
/// runs will run it — same user, same sandbox, same limits. So an
/// interpreter the run's user cannot reach (say, under `/root`) is passed
/// over for the next one.
pub(crate) async fn detect(jail: &Jail, path: Option<&std::ffi::OsStr>) -> Vec<Language> {
    let dirs: Vec<PathBuf> = path
        .map(|path| std::env::split_paths(path).collect())
        .unwrap_or_default();
    let probes = SPECS.iter().map(|spec| async {
        Language {
            spec,
            found: find(jail, spec, &dirs).await,
        }
    });
    futures_util::future::join_all(probes).await
}

async fn find(jail: &Jail, spec: &'static Spec, dirs: &[PathBuf]) -> Result<Interpreter, String> {
    let mut seen = HashSet::new();
    let mut refused = Vec::new();
    let mut untried = Vec::new();
    for executable in spec.executables {
        for dir in dirs {
            let candidate = dir.join(executable);
            if !is_executable(&candidate) || !seen.insert(candidate.clone()) {
                continue;
            }
            match probe(jail, spec, &candidate).await {
                Ok(version) => {
                    return Ok(Interpreter {
                        path: candidate,
                        version,
                    });
                }
                Err(Probe::Failed(why)) => refused.push(format!("{}: {why}", candidate.display())),
                Err(Probe::Setup(why)) => untried.push(format!("{}: {why}", candidate.display())),
            }
        }
    }
    let mut reasons = Vec::new();
    if !refused.is_empty() {
        let how = match jail.isolation() {
            Isolation::Bubblewrap(_) => {
                "found but did not run as runs run it (as the run user, in the sandbox, which shows only system directories)"
            }
            Isolation::None { .. } => "found but did not run as runs run it (as the run user)",
        };
        reasons.push(format!("{how}: {}", refused.join("; ")));
    }
    if !untried.is_empty() {
        reasons.push(format!(
            "found but could not be tried, because a run could not be set up: {}",
            untried.join("; ")
        ));
    }
    if reasons.is_empty() {
        Err(format!("no {} in PATH", spec.executables.join(" or ")))
    } else {
        Err(reasons.join("; "))
    }
}

/// Why an interpreter was passed over.
enum Probe {
    /// It ran and failed.
    Failed(String),
    /// A run could not be set up to try it: not the interpreter's fault.
    Setup(String),
}

/// Runs the version command; returns the version it printed, if any.
async fn probe(jail: &Jail, spec: &Spec, program: &Path) -> Result<Option<String>, Probe> {
    let launch = Launch {
        program: program.to_owned(),
        args: spec.version.iter().map(OsString::from).collect(),
        env: Vec::new(),
        stdin: None,
    };
    let Collected { status, output, .. } = jail
        .run_collected("probe", launch, &[], Duration::from_secs(10), 4096)
        .await
        .map_err(|error| Probe::Setup(error.to_string()))?;
    let text = String::from_utf8_lossy(&output);
    if status.success() {
        Ok(version_in(&text))
    } else {
        let first = text.lines().next().unwrap_or("").trim();
        Err(Probe::Failed(format!(
            "{}: {first}",
            super::jail::describe_status(status)
        )))
    }
}

fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path)
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

/// The first dotted number in `text`: `Python 3.11.2` → `3.11.2`,
/// `v20.1.0` → `20.1.0`, `5.2.15(1)-release` → `5.2.15`.
fn version_in(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut start = 0;
    while start < bytes.len() {
        if bytes[start].is_ascii_digit() {
            let end = start
                + bytes[start..]
                    .iter()
                    .take_while(|b| b.is_ascii_digit() || **b == b'.')
                    .count();
            let number = text[start..end].trim_end_matches('.');
            if number.contains('.') {
                return Some(number.to_owned());
            }
            start = end;
        } else {
            start += 1;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_from_what_interpreters_print() {
        assert_eq!(version_in("Python 3.11.2\n").as_deref(), Some("3.11.2"));
        assert_eq!(version_in("v20.20.2").as_deref(), Some("20.20.2"));
        assert_eq!(version_in("5.2.15(1)-release").as_deref(), Some("5.2.15"));
        assert_eq!(version_in("v5.36.0").as_deref(), Some("5.36.0"));
        assert_eq!(version_in("ruby 3.1.2p20").as_deref(), Some("3.1.2"));
        assert_eq!(version_in("build 7 of 2."), None);
        assert_eq!(version_in(""), None);
    }

    #[test]
    fn names_and_aliases_pick_a_language() {
        let python = Language {
            spec: &SPECS[0],
            found: Err("absent".into()),
        };
        assert!(python.answers_to("python"));
        assert!(python.answers_to("Python3"));
        assert!(!python.answers_to("node"));
        let args = python.run_args(&["a b".into()]);
        assert_eq!(args, ["-u", "main.py", "a b"]);
    }
}
