//! Each tool's input schema and its argument parser agree. The schemas are
//! written by hand in `args.rs` next to the serde structs they describe;
//! these tests keep the two in step, without a schema-deriving dependency:
//!
//! - the parser reads exactly the fields the schema lists (serde's derive
//!   names them, see [`fields_of`]), each required in both or in neither;
//! - every value the schema allows, at its bounds and for every enum value,
//!   is accepted by the parser;
//! - every value the schema forbids (past a bound, outside an enum, of the
//!   wrong type, an unknown field) is refused by the parser, whether or not
//!   the runtime's own schema check would have caught it first.
//!
//! What a schema cannot say (sizes in bytes, names of environment
//! variables, paths that stay inside) is `args.rs`'s own tests' business.

use std::sync::Arc;
use std::time::Duration;

use serde::de::{self, DeserializeOwned, Deserializer, Visitor};
use serde_json::{Map, Value, json};
use weir_runtime::Tool;

use super::args::{self, ExecuteArgs, FileArg, ListArgs, ValidateArgs};
use super::jail::{Base, Jail, Limits, Users};
use super::language::{Interpreter, Language, SPECS};
use super::sandbox::Isolation;
use super::tools::{ExecuteCode, ListLanguages, ValidateCode};
use super::{ExecConfig, Shared};

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

/// A parser under test: `Err` holds its message.
type Parse<'a> = &'a dyn Fn(Value) -> Result<(), String>;

#[test]
fn execute_code_schema_and_parser_agree() {
    let tool = ExecuteCode(pack());
    let schema = tool.info().input_schema;
    let parse = |arguments| tool.arguments(arguments).map(drop).map_err(|e| e.message);
    assert_agree(&schema, &fields_of::<ExecuteArgs>(), &parse);

    // A file, in `files`, around the smallest valid call.
    let base = minimal(&schema);
    let in_files = |file: Value| {
        let mut arguments = base.clone();
        arguments.insert("files".into(), json!([file]));
        parse(Value::Object(arguments))
    };
    let file_schema = &schema["properties"]["files"]["items"];
    assert_agree(file_schema, &fields_of::<FileArg>(), &in_files);

    // The languages offered are those the parser knows, by name and alias
    // (this pack has found every one).
    let mut offered = strings(&schema["properties"]["language"]["enum"]);
    let mut known: Vec<&str> = SPECS
        .iter()
        .flat_map(|spec| std::iter::once(spec.name).chain(spec.aliases.iter().copied()))
        .collect();
    offered.sort_unstable();
    known.sort_unstable();
    assert_eq!(offered, known);
}

#[test]
fn validate_code_schema_and_parser_agree() {
    let tool = ValidateCode(pack());
    let schema = tool.info().input_schema;
    let parse = |arguments| tool.arguments(arguments).map(drop).map_err(|e| e.message);
    assert_agree(&schema, &fields_of::<ValidateArgs>(), &parse);
}

#[test]
fn list_languages_schema_and_parser_agree() {
    let schema = ListLanguages(pack()).info().input_schema;
    let parse = |arguments| {
        args::parse::<ListArgs>(arguments)
            .map(drop)
            .map_err(|e| e.message)
    };
    assert_agree(&schema, &fields_of::<ListArgs>(), &parse);
}

/// The names of the fields `T`'s derived `Deserialize` reads: it hands
/// them all to `deserialize_struct`, which this deserializer only records.
fn fields_of<T: DeserializeOwned>() -> Vec<&'static str> {
    struct Recorder<'a>(&'a mut Option<&'static [&'static str]>);

    impl<'de> Deserializer<'de> for Recorder<'_> {
        type Error = de::value::Error;

        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
            Err(de::Error::custom("only a struct's fields are recorded"))
        }

        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _name: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Self::Error> {
            *self.0 = Some(fields);
            Err(de::Error::custom("recorded"))
        }

        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
            bytes byte_buf option unit unit_struct newtype_struct seq tuple
            tuple_struct map enum identifier ignored_any
        }
    }

    let mut fields = None;
    let _ = T::deserialize(Recorder(&mut fields));
    fields.expect("arguments are a struct").to_vec()
}

/// Checks that `parse` agrees with the object schema `schema`, whose
/// parser reads `fields`.
fn assert_agree(schema: &Value, fields: &[&str], parse: Parse<'_>) {
    known_keywords(schema);
    let properties = schema["properties"]
        .as_object()
        .expect("an object schema lists its properties");
    let mut described: Vec<&str> = properties.keys().map(String::as_str).collect();
    let mut read = fields.to_vec();
    described.sort_unstable();
    read.sort_unstable();
    assert_eq!(
        described, read,
        "the schema's properties, the parser's fields"
    );

    let base = minimal(schema);
    let with = |name: &str, value: Option<&Value>| {
        let mut arguments = base.clone();
        match value {
            Some(value) => arguments.insert(name.to_owned(), value.clone()),
            None => arguments.remove(name),
        };
        Value::Object(arguments)
    };
    let accepted = |arguments: Value| {
        // The runtime checks arguments against the schema first: a value
        // that fails that check would prove nothing here.
        weir_core::check_arguments(schema, &arguments)
            .unwrap_or_else(|error| panic!("the test's own {}: {error}", short(&arguments)));
        if let Err(error) = parse(arguments.clone()) {
            let arguments = short(&arguments);
            panic!("the schema allows {arguments}, the parser refuses it: {error}");
        }
    };
    let refused = |arguments: Value| {
        assert!(
            parse(arguments.clone()).is_err(),
            "the schema forbids {}, the parser accepts it",
            short(&arguments)
        );
    };

    // The required properties alone: so every other field is optional to
    // the parser too.
    accepted(Value::Object(base.clone()));
    let required = strings(&schema["required"]);
    for name in fields {
        let property = &properties[*name];
        if required.contains(name) {
            refused(with(name, None));
        }
        for value in valid(property) {
            accepted(with(name, Some(&value)));
        }
        for value in invalid(property) {
            refused(with(name, Some(&value)));
        }
    }
    let unknown = with("not_a_field", Some(&json!(1)));
    match schema.get("additionalProperties") {
        Some(Value::Bool(false)) => refused(unknown),
        None => accepted(unknown),
        Some(other) => panic!("additionalProperties {other} at the top of arguments"),
    }
}

/// The smallest object `schema` allows: its required properties only.
fn minimal(schema: &Value) -> Map<String, Value> {
    strings(&schema["required"])
        .into_iter()
        .map(|name| {
            (
                name.to_owned(),
                valid(&schema["properties"][name]).remove(0),
            )
        })
        .collect()
}

/// A string every string field takes: plain text that is also base64 (of
/// "hi"), as a file's `content` may be read as either.
const TEXT: &str = "aGk=";

/// A size past any small limit a parser might keep to itself: where a
/// schema sets no bound, strings, arrays and objects this large are allowed.
const UNBOUNDED: usize = 4096;

/// Values `schema` allows: a plain one first, then each bound reached (or,
/// where there is none, [`UNBOUNDED`] or a large number).
fn valid(schema: &Value) -> Vec<Value> {
    known_keywords(schema);
    if let Some(values) = schema.get("enum") {
        return values.as_array().expect("an enum is an array").clone();
    }
    let get = |keyword: &str| schema.get(keyword).and_then(Value::as_f64);
    let count = |keyword: &str| {
        schema
            .get(keyword)
            .and_then(Value::as_u64)
            .map_or(UNBOUNDED, |n| n as usize)
    };
    match schema["type"].as_str() {
        Some("string") => vec![json!(TEXT), json!("x".repeat(count("maxLength")))],
        Some("number") => {
            let low = get("exclusiveMinimum").or(get("minimum"));
            let high = get("maximum");
            let between = match (low, high) {
                (Some(low), Some(high)) => (low + high) / 2.0,
                (Some(low), None) => low + 1.0,
                (None, Some(high)) => high - 1.0,
                (None, None) => 1.0,
            };
            let least = match (get("minimum"), get("exclusiveMinimum")) {
                (Some(min), _) => min,
                (None, Some(low)) => low + 1e-3,
                (None, None) => -1e9,
            };
            vec![json!(between), json!(least), json!(high.unwrap_or(1e9))]
        }
        Some("array") => {
            let item = valid(&schema["items"]).remove(0);
            vec![
                json!([]),
                json!([item.clone()]),
                Value::Array(vec![item; count("maxItems")]),
            ]
        }
        Some("object") if schema.get("properties").is_some() => {
            vec![Value::Object(minimal(schema))]
        }
        Some("object") => {
            // Entries the schema does not constrain may hold anything.
            let each = match schema.get("additionalProperties") {
                None => json!(1),
                Some(each) if each.is_object() => valid(each).remove(0),
                Some(other) => panic!("additionalProperties {other}: teach this test about it"),
            };
            vec![
                json!({}),
                entries(1, &each),
                entries(count("maxProperties"), &each),
            ]
        }
        other => panic!("a schema of type {other:?}: teach this test about it"),
    }
}

/// An object of `n` entries `x0`, `x1`, … (also valid variable names),
/// each `value`.
fn entries(n: usize, value: &Value) -> Value {
    Value::Object((0..n).map(|i| (format!("x{i}"), value.clone())).collect())
}

/// Values `schema` forbids: the wrong type, outside the enum, past each
/// bound, with a forbidden item or entry.
fn invalid(schema: &Value) -> Vec<Value> {
    let get = |keyword: &str| schema.get(keyword).and_then(Value::as_f64);
    let count = |keyword: &str| schema.get(keyword).and_then(Value::as_u64);
    let mut values = Vec::new();
    if schema.get("enum").is_some() {
        values.push(json!("not one of them"));
    }
    match schema["type"].as_str() {
        Some("string") => {
            values.push(json!(1));
            if let Some(max) = count("maxLength") {
                values.push(json!("x".repeat(max as usize + 1)));
            }
        }
        Some("number") => {
            values.push(json!("1"));
            values.extend(get("exclusiveMinimum").map(|low| json!(low)));
            values.extend(get("minimum").map(|low| json!(low - 1.0)));
            values.extend(get("maximum").map(|high| json!(high + 1.0)));
        }
        Some("array") => {
            values.push(json!("x"));
            let item = valid(&schema["items"]).remove(0);
            if let Some(max) = count("maxItems") {
                values.push(Value::Array(vec![item; max as usize + 1]));
            }
            values.extend(
                invalid(&schema["items"])
                    .into_iter()
                    .map(|bad| json!([bad])),
            );
        }
        Some("object") => {
            values.push(json!("x"));
            if !strings(&schema["required"]).is_empty() {
                values.push(json!({}));
            }
            if schema.get("additionalProperties") == Some(&Value::Bool(false)) {
                let mut extra = minimal(schema);
                extra.insert("not_a_field".into(), json!(1));
                values.push(Value::Object(extra));
            }
            if let Some(each) = schema.get("additionalProperties").filter(|s| s.is_object()) {
                values.extend(invalid(each).iter().map(|bad| entries(1, bad)));
                if let Some(max) = count("maxProperties") {
                    values.push(entries(max as usize + 1, &valid(each).remove(0)));
                }
            }
        }
        other => panic!("a schema of type {other:?}: teach this test about it"),
    }
    values
}

/// Fails on a keyword [`valid`] and [`invalid`] do not understand, so that
/// a new constraint in a schema cannot go untested.
fn known_keywords(schema: &Value) {
    const KNOWN: &[&str] = &[
        "type",
        "description",
        "enum",
        "maxLength",
        "exclusiveMinimum",
        "minimum",
        "maximum",
        "items",
        "maxItems",
        "properties",
        "required",
        "additionalProperties",
        "maxProperties",
    ];
    for keyword in schema.as_object().expect("a schema is an object").keys() {
        assert!(
            KNOWN.contains(&keyword.as_str()),
            "the schema keyword {keyword}: teach this test about it"
        );
    }
}

fn strings(value: &Value) -> Vec<&str> {
    value
        .as_array()
        .into_iter()
        .flatten()
        .map(|v| v.as_str().expect("a string"))
        .collect()
}

/// `value` as JSON, cut to a readable length for a failure message.
fn short(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(300) {
        Some((end, _)) => format!("{}… ({} bytes)", &text[..end], text.len()),
        None => text,
    }
}
