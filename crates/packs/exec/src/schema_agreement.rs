//! Each tool's input schema and its argument parser agree, by the check
//! every pack runs ([`weir_runtime::tool_contract`]): the parser reads
//! exactly the fields the schema lists, accepts every value the schema
//! allows (at its bounds, every enum value) and refuses every value it
//! forbids. Here also a file in `files`, and the languages offered.
//!
//! What a schema cannot say (sizes in bytes, names of environment
//! variables, paths that stay inside) is `args.rs`'s own tests' business.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use weir_runtime::tool_contract::{ToolCheck, check_pack, fields_of, valid};
use weir_runtime::{Tool, ToolInfo};

use super::args::{self, ExecuteArgs, FileArg, ListArgs, ValidateArgs};
use super::jail::{Base, Jail, Limits, Users};
use super::language::{Interpreter, Language, SPECS};
use super::sandbox::Isolation;
use super::tools::{ExecuteCode, ListLanguages, ValidateCode};
use super::{ExecConfig, ExecPack, Shared};

/// A pack that has every language, without looking at this machine.
fn pack() -> Arc<Shared> {
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
            reason: "a test".into(),
        },
        Users::Own { uid: 1000 },
        Base::open(&std::env::temp_dir(), false).unwrap(),
        weir_proc::Cgroups::none("a test"),
        limits,
    );
    let languages = SPECS
        .iter()
        .map(|spec| Language {
            spec,
            found: Ok(Interpreter {
                path: format!("/usr/bin/{}", spec.executables[0]).into(),
                version: None,
            }),
        })
        .collect();
    Arc::new(Shared {
        jail,
        languages,
        config: ExecConfig {
            default_timeout: Duration::from_secs(30),
            max_timeout: Duration::from_secs(60),
            ..ExecConfig::default()
        },
    })
}

#[test]
fn every_tool_s_schema_and_parser_agree() {
    let shared = pack();
    let execute = ExecuteCode(shared.clone());
    let validate = ValidateCode(shared.clone());
    let list = ListLanguages(shared.clone());
    check_pack(
        &ExecPack { pack: shared },
        vec![
            ToolCheck::new(execute.info(), |arguments| {
                execute.arguments(arguments).map(drop)
            })
            .fields(fields_of::<ExecuteArgs>()),
            ToolCheck::new(validate.info(), |arguments| {
                validate.arguments(arguments).map(drop)
            })
            .fields(fields_of::<ValidateArgs>()),
            ToolCheck::new(list.info(), |arguments| {
                args::parse::<ListArgs>(arguments).map(drop)
            })
            .fields(fields_of::<ListArgs>()),
        ],
    );
}

#[test]
fn a_file_s_schema_and_parser_agree() {
    let tool = ExecuteCode(pack());
    let schema = tool.info().input_schema;
    // A file, in `files`, around the smallest valid call: checked as the
    // arguments of a tool of its own.
    let base = json!({"language": valid(&schema["properties"]["language"])[0], "code": "x"});
    let file_schema = schema["properties"]["files"]["items"].clone();
    let in_files = |file: Value| {
        let mut arguments = base.clone();
        arguments["files"] = json!([file]);
        tool.arguments(arguments).map(drop)
    };
    ToolCheck::new(
        ToolInfo::new("execute_code files[]", "", file_schema),
        in_files,
    )
    .fields(fields_of::<FileArg>())
    .run();
}

#[test]
fn the_languages_offered_are_those_the_parser_knows() {
    let schema = ExecuteCode(pack()).info().input_schema;
    // By name and alias (this pack has found every one).
    let offered = schema["properties"]["language"]["enum"].as_array().unwrap();
    let mut offered: Vec<&str> = offered.iter().filter_map(Value::as_str).collect();
    let mut known: Vec<&str> = SPECS
        .iter()
        .flat_map(|spec| std::iter::once(spec.name).chain(spec.aliases.iter().copied()))
        .collect();
    offered.sort_unstable();
    known.sort_unstable();
    assert_eq!(offered, known);
}
