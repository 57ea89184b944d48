//! A tool's input schema and its argument parser agree: the check every
//! tool of every pack runs in its tests (feature `tool-contract`).
//!
//! Schemas are written by hand next to the parsers they describe; this
//! keeps the two in step without a schema-deriving dependency. From the
//! schema alone it makes arguments:
//!
//! - allowed ones: the required properties alone, then each property at a
//!   plain value, at each bound, at every enum value; the parser must
//!   accept each;
//! - forbidden ones: a required property missing, each property of the
//!   wrong type, outside its enum, past a bound, an unknown field where
//!   `additionalProperties` is false; the parser must refuse each as an
//!   invalid-arguments error, never by a panic. A missing required field,
//!   a wrong type and an unknown field must also fail the scheduler's own
//!   check, which refuses a call before any run starts.
//!
//! What a schema cannot say (sizes in bytes, paths inside the roots, one
//! field that needs another) stays with the pack's own tests: a pack
//! names the properties whose allowed values only hold beside others
//! ([`ToolCheck::except`]), and gives a value where the schema cannot
//! make one ([`ToolCheck::sample`], for a `pattern`).
//!
//! ```
//! use serde_json::{Value, json};
//! use weir_runtime::{ToolInfo, kit, tool_contract::ToolCheck};
//!
//! #[derive(serde::Deserialize)]
//! #[serde(deny_unknown_fields)]
//! struct Args { path: String, #[serde(default)] depth: Option<u32> }
//!
//! let info = ToolInfo::new("walk", "Walks.", json!({
//!     "type": "object",
//!     "properties": {"path": {"type": "string"}, "depth": {"type": "integer", "minimum": 0}},
//!     "required": ["path"],
//!     "additionalProperties": false,
//! }));
//! ToolCheck::new(info, |arguments: Value| kit::parse_object::<Args>(arguments).map(drop)).run();
//! ```

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};

use serde::de::{self, DeserializeOwned, Deserializer, Visitor};
use serde_json::{Map, Value, json};
use weir_core::{FailureCode, RunError};

use crate::{Pack, ToolInfo};

/// A parser under test: the tool's own reading of its arguments, without
/// running anything.
type Parse<'a> = Box<dyn Fn(Value) -> Result<(), RunError> + 'a>;

/// One tool's check: its schema, its parser, and what the pack says of
/// the schema's limits. [`ToolCheck::run`] panics, saying which
/// arguments the two disagree on.
pub struct ToolCheck<'a> {
    info: ToolInfo,
    parse: Parse<'a>,
    fields: Option<Vec<&'static str>>,
    samples: BTreeMap<String, Value>,
    except: BTreeMap<String, String>,
    base: Option<Map<String, Value>>,
}

impl<'a> ToolCheck<'a> {
    /// The check of the tool `info` describes, whose parser is `parse`.
    pub fn new(
        info: ToolInfo,
        parse: impl Fn(Value) -> Result<(), RunError> + 'a,
    ) -> ToolCheck<'a> {
        ToolCheck {
            info,
            parse: Box::new(parse),
            fields: None,
            samples: BTreeMap::new(),
            except: BTreeMap::new(),
            base: None,
        }
    }

    /// The parser reads exactly these fields ([`fields_of`] a serde
    /// struct): the schema must list the same properties.
    pub fn fields(mut self, fields: Vec<&'static str>) -> ToolCheck<'a> {
        self.fields = Some(fields);
        self
    }

    /// The allowed value of `property` to use, where the schema cannot
    /// make one (a `pattern`, a path that must exist): its only allowed
    /// value here, and the value in every other call that needs it.
    pub fn sample(mut self, property: &str, value: Value) -> ToolCheck<'a> {
        self.samples.insert(property.to_owned(), value);
        self
    }

    /// `property`'s allowed values are not checked here, for the reason
    /// `why` (they hold only beside other fields: the pack's own tests
    /// check them); its forbidden values still are.
    pub fn except(mut self, property: &str, why: &str) -> ToolCheck<'a> {
        self.except.insert(property.to_owned(), why.to_owned());
        self
    }

    /// The smallest call the parser takes, where it needs more than the
    /// schema's required properties (one of two fields): every other call
    /// is this one with one property changed. It must hold the required
    /// properties and pass the schema.
    pub fn base(mut self, base: Value) -> ToolCheck<'a> {
        match base {
            Value::Object(base) => self.base = Some(base),
            other => panic!("a base call is an object, not {other}"),
        }
        self
    }

    /// Checks the tool's parser against its schema; panics at the first
    /// disagreement.
    pub fn run(self) {
        let schema = &self.info.input_schema;
        let name = &self.info.name;
        assert_eq!(schema["type"], "object", "{name}: arguments are an object");
        known_keywords(schema);
        let properties = schema["properties"]
            .as_object()
            .unwrap_or_else(|| panic!("{name}: an object schema lists its properties"));
        if let Some(fields) = &self.fields {
            let mut described: Vec<&str> = properties.keys().map(String::as_str).collect();
            let mut read = fields.clone();
            described.sort_unstable();
            read.sort_unstable();
            assert_eq!(
                described, read,
                "{name}: the schema's properties, the parser's fields"
            );
        }
        for property in self.samples.keys().chain(self.except.keys()) {
            assert!(
                properties.contains_key(property),
                "{name}: {property} is not a property of the schema"
            );
        }

        let base = self.base.clone().unwrap_or_else(|| self.minimal(schema));
        let with = |property: &str, value: Option<&Value>| {
            let mut arguments = base.clone();
            match value {
                Some(value) => arguments.insert(property.to_owned(), value.clone()),
                None => arguments.remove(property),
            };
            Value::Object(arguments)
        };
        // The required properties alone: so every other field is optional
        // to the parser too.
        self.accepted(Value::Object(base.clone()));
        let required = strings(&schema["required"]);
        for (property, property_schema) in properties {
            if required.contains(&property.as_str()) {
                self.refused(with(property, None), Gate::Refuses);
            }
            if !self.except.contains_key(property) {
                for value in self.valid_of(property, property_schema) {
                    self.accepted(with(property, Some(&value)));
                }
            }
            for (value, gate) in invalid(property_schema) {
                self.refused(with(property, Some(&value)), gate);
            }
        }
        let unknown = with("not_a_field", Some(&json!(1)));
        match schema.get("additionalProperties") {
            Some(Value::Bool(false)) => self.refused(unknown, Gate::Refuses),
            None => self.accepted(unknown),
            Some(other) => panic!("{name}: additionalProperties {other} at the top of arguments"),
        }
    }

    /// The smallest object `schema` allows: its required properties only,
    /// samples where given.
    fn minimal(&self, schema: &Value) -> Map<String, Value> {
        strings(&schema["required"])
            .into_iter()
            .map(|property| {
                let value = self.valid_of(property, &schema["properties"][property]);
                (property.to_owned(), value[0].clone())
            })
            .collect()
    }

    /// The allowed values of a top-level `property`: its sample, if the
    /// pack gave one, else what its schema allows.
    fn valid_of(&self, property: &str, schema: &Value) -> Vec<Value> {
        match self.samples.get(property) {
            Some(sample) => vec![sample.clone()],
            None => valid(schema),
        }
    }

    /// Whether the parser accepts `arguments`, with no panic.
    fn parse(&self, arguments: &Value) -> Result<(), RunError> {
        catch_unwind(AssertUnwindSafe(|| (self.parse)(arguments.clone()))).unwrap_or_else(|_| {
            panic!(
                "{}: the parser panicked on {}",
                self.info.name,
                short(arguments)
            )
        })
    }

    fn accepted(&self, arguments: Value) {
        let name = &self.info.name;
        // The scheduler checks arguments against the schema first: a
        // value that fails that check would prove nothing here.
        if let Err(error) = weir_core::check_arguments(&self.info.input_schema, &arguments) {
            panic!("{name}: the check's own {}: {error}", short(&arguments));
        }
        if let Err(error) = self.parse(&arguments) {
            let arguments = short(&arguments);
            panic!("{name}: the schema allows {arguments}, the parser refuses it: {error}");
        }
    }

    fn refused(&self, arguments: Value, gate: Gate) {
        let name = &self.info.name;
        match self.parse(&arguments) {
            Ok(()) => panic!(
                "{name}: the schema forbids {}, the parser accepts it",
                short(&arguments)
            ),
            Err(error) => assert_eq!(
                error.code,
                FailureCode::InvalidArguments,
                "{name}: {} is refused, but not as invalid arguments: {error}",
                short(&arguments)
            ),
        }
        if gate == Gate::Refuses {
            assert!(
                weir_core::check_arguments(&self.info.input_schema, &arguments).is_err(),
                "{name}: the scheduler would start a run for {}",
                short(&arguments)
            );
        }
    }
}

/// Runs `checks` over `pack`: one for each of its tools, as it registers
/// them (a tool may have several, each from another [`ToolCheck::base`]).
/// A tool without a check fails, so that a new tool cannot go unchecked,
/// and so does a check of another schema than the tool's.
pub fn check_pack(pack: &dyn Pack, checks: Vec<ToolCheck<'_>>) {
    let tools = pack.tools();
    let mut registered: Vec<String> = tools.iter().map(|tool| tool.info().name).collect();
    let mut checked: Vec<String> = checks.iter().map(|check| check.info.name.clone()).collect();
    registered.sort_unstable();
    checked.sort_unstable();
    checked.dedup();
    assert_eq!(
        registered,
        checked,
        "pack {}: its tools, the tools checked",
        pack.name()
    );
    for check in checks {
        let tool = tools
            .iter()
            .map(|tool| tool.info())
            .find(|info| info.name == check.info.name)
            .expect("listed above");
        assert_eq!(
            tool.input_schema, check.info.input_schema,
            "{}: the check's schema is the tool's",
            tool.name
        );
        check.run();
    }
}

/// The description of `pack`'s tool `name`, as the pack registers it: what
/// a [`ToolCheck`] of it starts from.
pub fn info_of(pack: &dyn Pack, name: &str) -> ToolInfo {
    let infos = pack.tools().into_iter().map(|tool| tool.info());
    infos
        .into_iter()
        .find(|info| info.name == name)
        .unwrap_or_else(|| panic!("pack {} has no tool {name}", pack.name()))
}

/// Whether the scheduler's own schema check (which refuses a call before
/// any run starts) must refuse a forbidden value too: it checks types,
/// required and unknown fields, enums and bounds, not every keyword.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Gate {
    Refuses,
    /// The parser alone refuses it (the run starts and fails at once).
    ParserOnly,
}

/// The names of the fields `T`'s derived `Deserialize` reads: it hands
/// them all to `deserialize_struct`, which this deserializer only records.
pub fn fields_of<T: DeserializeOwned>() -> Vec<&'static str> {
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

/// A string every string field takes: plain text that is also base64 (of
/// "hi"), as a file's `content` may be read as either.
const TEXT: &str = "aGk=";

/// A size past any small limit a parser might keep to itself: where a
/// schema sets no bound, strings, arrays and objects this large are allowed.
const UNBOUNDED: usize = 4096;

/// The smallest object `schema` allows, for a nested object.
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

/// Values `schema` allows: a plain one first, then each bound reached (or,
/// where there is none, 4096 items or characters, or a large number).
pub fn valid(schema: &Value) -> Vec<Value> {
    known_keywords(schema);
    if let Some(values) = schema.get("enum") {
        return values.as_array().expect("an enum is an array").clone();
    }
    let count = |keyword: &str| {
        schema
            .get(keyword)
            .and_then(Value::as_u64)
            .map_or(UNBOUNDED, |n| n as usize)
    };
    match schema["type"].as_str() {
        Some("string") => {
            assert!(
                schema.get("pattern").is_none(),
                "a string with a pattern: give the check a sample of it"
            );
            vec![json!(TEXT), json!("x".repeat(count("maxLength")))]
        }
        Some("boolean") => vec![json!(true), json!(false)],
        Some("number") => numbers(schema, false),
        Some("integer") => numbers(schema, true),
        Some("array") => {
            let items = valid(&schema["items"]);
            let least = schema.get("minItems").and_then(Value::as_u64).unwrap_or(0);
            let mut values = Vec::new();
            if least == 0 {
                values.push(json!([]));
            }
            values.push(json!([items[0].clone()]));
            if schema.get("uniqueItems") == Some(&Value::Bool(true)) {
                // As many different items as the item schema makes.
                values.push(Value::Array(items));
            } else {
                values.push(Value::Array(vec![items[0].clone(); count("maxItems")]));
            }
            values
        }
        Some("object") if schema.get("properties").is_some() => {
            vec![Value::Object(minimal(schema))]
        }
        Some("object") => {
            // Entries the schema does not constrain may hold anything.
            let each = match schema.get("additionalProperties") {
                None => json!(1),
                Some(each) if each.is_object() => valid(each).remove(0),
                Some(other) => panic!("additionalProperties {other}: teach this check about it"),
            };
            vec![
                json!({}),
                entries(1, &each),
                entries(count("maxProperties"), &each),
            ]
        }
        other => panic!("a schema of type {other:?}: teach this check about it (or give a sample)"),
    }
}

/// Numbers `schema` allows: one between its bounds, the least, the most.
fn numbers(schema: &Value, whole: bool) -> Vec<Value> {
    let get = |keyword: &str| schema.get(keyword).and_then(Value::as_f64);
    let low = get("exclusiveMinimum").or(get("minimum"));
    let high = get("maximum");
    let between = match (low, high) {
        (Some(low), Some(high)) => (low + high) / 2.0,
        (Some(low), None) => low + 1.0,
        (None, Some(high)) => high - 1.0,
        (None, None) => 1.0,
    };
    let step = if whole { 1.0 } else { 1e-3 };
    let least = match (get("minimum"), get("exclusiveMinimum")) {
        (Some(min), _) => min,
        (None, Some(low)) => low + step,
        (None, None) => -1e9,
    };
    let most = high.unwrap_or(1e9);
    [between, least, most]
        .into_iter()
        .map(|n| {
            if whole {
                json!(n.floor() as i64)
            } else {
                json!(n)
            }
        })
        .collect()
}

/// An object of `n` entries `x0`, `x1`, … (also valid variable names),
/// each `value`.
fn entries(n: usize, value: &Value) -> Value {
    Value::Object((0..n).map(|i| (format!("x{i}"), value.clone())).collect())
}

/// Values `schema` forbids: the wrong type, outside the enum, past each
/// bound, with a forbidden item or entry; and whether the scheduler's
/// check refuses each too.
fn invalid(schema: &Value) -> Vec<(Value, Gate)> {
    use Gate::{ParserOnly, Refuses};
    let get = |keyword: &str| schema.get(keyword).and_then(Value::as_f64);
    let count = |keyword: &str| schema.get(keyword).and_then(Value::as_u64);
    let mut values = Vec::new();
    if schema.get("enum").is_some() {
        values.push((json!("not one of them"), Refuses));
    }
    if let Some(Value::Array(types)) = schema.get("type") {
        // Several types: a value of none of them.
        let candidates = [json!(1.5), json!(true), json!("x"), json!([]), json!({})];
        let wrong = candidates
            .into_iter()
            .find(|value| weir_core::check_arguments(&json!({"type": types}), value).is_err());
        values.extend(wrong.map(|value| (value, Refuses)));
        return values;
    }
    match schema["type"].as_str() {
        Some("string") => {
            values.push((json!(1), Refuses));
            if let Some(min) = count("minLength").filter(|min| *min > 0) {
                values.push((json!("x".repeat(min as usize - 1)), Refuses));
            }
            if let Some(max) = count("maxLength") {
                values.push((json!("x".repeat(max as usize + 1)), Refuses));
            }
        }
        Some("boolean") => values.push((json!("true"), Refuses)),
        Some(kind @ ("number" | "integer")) => {
            values.push((json!("1"), Refuses));
            if kind == "integer" {
                values.push((json!(get("minimum").unwrap_or(0.0) + 1.5), Refuses));
            }
            values.extend(get("exclusiveMinimum").map(|low| (json!(low), ParserOnly)));
            values.extend(get("minimum").map(|low| (json!(low - 1.0), Refuses)));
            values.extend(get("maximum").map(|high| (json!(high + 1.0), Refuses)));
        }
        Some("array") => {
            values.push((json!("x"), Refuses));
            let item = valid(&schema["items"]).remove(0);
            if count("minItems").is_some_and(|min| min > 0) {
                values.push((json!([]), Refuses));
            }
            if let Some(max) = count("maxItems") {
                values.push((Value::Array(vec![item.clone(); max as usize + 1]), Refuses));
            }
            if schema.get("uniqueItems") == Some(&Value::Bool(true)) {
                values.push((json!([item.clone(), item]), ParserOnly));
            }
            values.extend(
                invalid(&schema["items"])
                    .into_iter()
                    .map(|(bad, gate)| (json!([bad]), gate)),
            );
        }
        Some("object") => {
            values.push((json!("x"), Refuses));
            if !strings(&schema["required"]).is_empty() {
                values.push((json!({}), Refuses));
            }
            if schema.get("additionalProperties") == Some(&Value::Bool(false)) {
                let mut extra = minimal(schema);
                extra.insert("not_a_field".into(), json!(1));
                values.push((Value::Object(extra), Refuses));
            }
            if let Some(each) = schema.get("additionalProperties").filter(|s| s.is_object()) {
                // The scheduler's check reads `additionalProperties: false`
                // only, not a schema of the entries.
                values.extend(
                    invalid(each)
                        .into_iter()
                        .map(|(bad, _)| (entries(1, &bad), ParserOnly)),
                );
                if let Some(max) = count("maxProperties") {
                    let item = valid(each).remove(0);
                    values.push((entries(max as usize + 1, &item), ParserOnly));
                }
            }
        }
        other => panic!("a schema of type {other:?}: teach this check about it"),
    }
    values
}

/// Fails on a keyword [`valid`] and [`invalid`] do not understand, so that
/// a new constraint in a schema cannot go untested.
fn known_keywords(schema: &Value) {
    const KNOWN: &[&str] = &[
        "type",
        "description",
        "default",
        "format",
        "enum",
        "minLength",
        "maxLength",
        "pattern",
        "exclusiveMinimum",
        "minimum",
        "maximum",
        "items",
        "minItems",
        "maxItems",
        "uniqueItems",
        "properties",
        "required",
        "additionalProperties",
        "maxProperties",
    ];
    for keyword in schema.as_object().expect("a schema is an object").keys() {
        assert!(
            KNOWN.contains(&keyword.as_str()),
            "the schema keyword {keyword}: teach this check about it"
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
