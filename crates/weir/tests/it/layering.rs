//! The crate layering, checked over `cargo metadata`: ARCHITECTURE.md's
//! absences as tested facts. Each workspace crate has a row saying which
//! weir crates it may depend on (and, for a few, which other crates); a new
//! crate fails here until it is given its row.

use std::collections::BTreeMap;

use serde_json::Value;

/// Which weir crates a crate may depend on, for building it and for its
/// tests. `None`: any (only the binary, which assembles everything).
struct Layer {
    name: &'static str,
    normal: Option<&'static [&'static str]>,
    dev: &'static [&'static str],
    /// When set, the only crates of any kind it may depend on (besides the
    /// weir ones above) for building.
    external: Option<&'static [&'static str]>,
}

const CORE: &[&str] = &["weir-core"];
const ENGINE: &[&str] = &["weir-core", "weir-runtime"];
/// What every tool pack may use: never an MCP crate, a client, a store or
/// another pack.
const PACK: &[&str] = &["weir-core", "weir-runtime", "weir-proc"];

/// Crates that exist for tests only: a dev-dependency, never a normal one.
const TEST_KITS: &[&str] = &["weir-fake-model"];

const LAYERS: &[Layer] = &[
    Layer {
        name: "weir-core",
        normal: Some(&[]),
        dev: &[],
        external: Some(&["serde", "serde_json", "thiserror"]),
    },
    Layer {
        name: "weir-runtime",
        normal: Some(CORE),
        dev: CORE,
        external: None,
    },
    Layer {
        name: "weir-store-sqlite",
        normal: Some(ENGINE),
        dev: ENGINE,
        external: None,
    },
    Layer {
        name: "weir-store-redis",
        normal: Some(ENGINE),
        dev: ENGINE,
        external: None,
    },
    Layer {
        name: "weir-mcp-wire",
        normal: Some(&[]),
        dev: &[],
        external: Some(&["serde", "serde_json"]),
    },
    Layer {
        // The HTTP edge: the guard, the run API, the dashboard. Beside the MCP
        // server: the binary composes their routes.
        name: "weir-web",
        normal: Some(ENGINE),
        dev: ENGINE,
        external: None,
    },
    Layer {
        name: "weir-mcp",
        // Its `/mcp` routes know no guard: the binary puts weir-web's in front.
        normal: Some(&["weir-core", "weir-runtime", "weir-mcp-wire"]),
        // Its tests drive it with the fixtures and weir's own client, behind
        // weir-web's guard as the binary does.
        dev: &[
            "weir-core",
            "weir-runtime",
            "weir-mcp-wire",
            "weir-web",
            "weir-client",
            "weir-fixtures",
        ],
        external: None,
    },
    Layer {
        name: "weir-client",
        normal: Some(&["weir-core", "weir-mcp-wire"]),
        // Its tests call a real weir server.
        dev: &[
            "weir-core",
            "weir-mcp-wire",
            "weir-runtime",
            "weir-mcp",
            "weir-fixtures",
        ],
        external: None,
    },
    Layer {
        name: "weir-proc",
        normal: Some(&[]),
        dev: &[],
        external: None,
    },
    Layer {
        name: "weir-fixtures",
        normal: Some(&["weir-core", "weir-runtime", "weir-mcp"]),
        dev: &["weir-core", "weir-runtime", "weir-mcp"],
        external: None,
    },
    Layer {
        name: "weir-agents",
        normal: Some(&["weir-core", "weir-proc"]),
        // Its tests drive the real agent CLIs against the fake model.
        dev: &["weir-core", "weir-proc", "weir-fake-model"],
        external: None,
    },
    Layer {
        // The packs that run coding agents: the pack row, plus the drivers.
        name: "weir-pack-critique",
        normal: Some(&["weir-core", "weir-runtime", "weir-proc", "weir-agents"]),
        dev: &["weir-core", "weir-runtime", "weir-proc", "weir-agents"],
        external: None,
    },
    Layer {
        name: "weir-pack-agents",
        normal: Some(&["weir-core", "weir-runtime", "weir-proc", "weir-agents"]),
        dev: &["weir-core", "weir-runtime", "weir-proc", "weir-agents"],
        external: None,
    },
    Layer {
        name: "weir-fake-model",
        // It runs the CLIs as weir-agents does (environment, process group).
        normal: Some(&["weir-agents"]),
        dev: &["weir-agents"],
        external: None,
    },
    Layer {
        name: "weir",
        normal: None,
        // Its tests run real agent CLIs as MCP hosts against the fake model.
        dev: &["weir-fake-model"],
        external: None,
    },
];

/// The layer of `crate_name`: its own row, or the pack row for `weir-pack-*`.
fn layer_of(crate_name: &str) -> Option<Layer> {
    let own = LAYERS.iter().find(|layer| layer.name == crate_name);
    if own.is_none() && crate_name.starts_with("weir-pack-") {
        return Some(Layer {
            name: "weir-pack-*",
            normal: Some(PACK),
            dev: PACK,
            external: None,
        });
    }
    own.map(|layer| Layer { ..*layer })
}

/// Every broken rule in `metadata` (the JSON of `cargo metadata --no-deps`),
/// one sentence each.
fn violations(metadata: &Value) -> Vec<String> {
    let mut found = Vec::new();
    let packages = metadata["packages"].as_array().expect("packages");
    let members: Vec<&str> = packages
        .iter()
        .filter_map(|package| package["name"].as_str())
        .collect();
    for package in packages {
        let name = package["name"].as_str().expect("name");
        let Some(layer) = layer_of(name) else {
            found.push(format!(
                "{name} has no row in the layering table (crates/weir/tests/it/layering.rs): say which weir crates it may depend on"
            ));
            continue;
        };
        let mut kinds: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for dependency in package["dependencies"].as_array().expect("dependencies") {
            let kind = dependency["kind"].as_str().unwrap_or("normal");
            kinds
                .entry(kind)
                .or_default()
                .push(dependency["name"].as_str().expect("dependency name"));
        }
        for (kind, dependencies) in kinds {
            for dependency in dependencies {
                if dependency == name {
                    // A crate's tests turning on one of its own features
                    // (e.g. weir-runtime's `store-contract`).
                    continue;
                }
                let is_member = members.contains(&dependency);
                let test_kit_outside_tests = kind != "dev" && TEST_KITS.contains(&dependency);
                let allowed = !test_kit_outside_tests
                    && match (kind, is_member) {
                        ("dev", true) => layer.dev.contains(&dependency),
                        ("dev", false) => true,
                        (_, true) => layer
                            .normal
                            .is_none_or(|allowed| allowed.contains(&dependency)),
                        (_, false) => layer
                            .external
                            .is_none_or(|allowed| allowed.contains(&dependency)),
                    };
                if !allowed {
                    found.push(format!(
                        "{name} ({}) must not depend on {dependency} ({kind} dependency)",
                        layer.name
                    ));
                }
            }
        }
    }
    found
}

fn workspace_metadata() -> Value {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = std::process::Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .output()
        .expect("run cargo metadata");
    assert!(
        output.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("cargo metadata prints JSON")
}

#[test]
fn every_crate_depends_only_on_the_layers_below_it() {
    let metadata = workspace_metadata();
    let broken = violations(&metadata);
    assert!(broken.is_empty(), "layering broken:\n{}", broken.join("\n"));
}

/// The check itself: a pack that imports the MCP server, a store or another
/// pack, a core that grows a runtime dependency, and a crate without a row
/// are each caught.
#[test]
fn the_check_catches_a_pack_importing_mcp_and_other_breaks() {
    let mut metadata = workspace_metadata();
    let packages = metadata["packages"].as_array_mut().unwrap();
    let add = |packages: &mut Vec<Value>, crate_name: &str, dependency: &str, kind: Value| {
        let package = packages
            .iter_mut()
            .find(|package| package["name"] == crate_name)
            .unwrap_or_else(|| panic!("{crate_name} is a workspace member"));
        package["dependencies"]
            .as_array_mut()
            .unwrap()
            .push(serde_json::json!({"name": dependency, "kind": kind}));
    };
    add(packages, "weir-pack-exec", "weir-mcp", Value::Null);
    add(
        packages,
        "weir-pack-exec",
        "weir-store-sqlite",
        "dev".into(),
    );
    add(packages, "weir-core", "tokio", Value::Null);
    add(packages, "weir-runtime", "weir-client", Value::Null);
    add(packages, "weir", "weir-fake-model", Value::Null);
    packages.push(serde_json::json!({"name": "weir-new", "dependencies": []}));
    let broken = violations(&metadata);
    assert_eq!(
        broken,
        [
            "weir-core (weir-core) must not depend on tokio (normal dependency)",
            "weir-runtime (weir-runtime) must not depend on weir-client (normal dependency)",
            "weir-pack-exec (weir-pack-*) must not depend on weir-store-sqlite (dev dependency)",
            "weir-pack-exec (weir-pack-*) must not depend on weir-mcp (normal dependency)",
            "weir (weir) must not depend on weir-fake-model (normal dependency)",
            "weir-new has no row in the layering table (crates/weir/tests/it/layering.rs): say which weir crates it may depend on",
        ]
    );
}

/// The words of `text`: runs of the characters a crate name is made of.
fn words(text: &str) -> Vec<&str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .filter(|word| !word.is_empty())
        .collect()
}

/// Every member missing from ARCHITECTURE.md's map: its crate diagram (the
/// first code block under "Crates and their layers") and its table (a row
/// whose crate cell is the member's name), one sentence each.
fn missing_from_the_map(architecture: &str, members: &[&str]) -> Vec<String> {
    let section = architecture
        .split("\n## Crates and their layers\n")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("ARCHITECTURE.md has a section \"Crates and their layers\"");
    let diagram = section
        .split("```")
        .nth(1)
        .expect("the section opens with the crate diagram");
    let in_diagram = words(diagram);
    let mut missing = Vec::new();
    for member in members {
        if !in_diagram.contains(member) {
            missing.push(format!(
                "{member} is not in ARCHITECTURE.md's crate diagram"
            ));
        }
        let row = format!("| `{member}` |");
        if !section.lines().any(|line| line.contains(&row)) {
            missing.push(format!(
                "{member} has no row in ARCHITECTURE.md's crate table"
            ));
        }
    }
    missing
}

#[test]
fn architecture_md_maps_every_crate() {
    let metadata = workspace_metadata();
    let members: Vec<&str> = metadata["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .filter_map(|package| package["name"].as_str())
        .collect();
    let architecture = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../ARCHITECTURE.md"
    ))
    .expect("read ARCHITECTURE.md");
    let missing = missing_from_the_map(&architecture, &members);
    assert!(missing.is_empty(), "{}", missing.join("\n"));
    // And the check catches a crate the map forgot.
    let forgotten = missing_from_the_map(&architecture, &["weir-new"]);
    assert_eq!(
        forgotten,
        [
            "weir-new is not in ARCHITECTURE.md's crate diagram",
            "weir-new has no row in ARCHITECTURE.md's crate table",
        ]
    );
}

/// Every source file of every crate opens with a `//!` comment saying what
/// it is for (rust-analyzer's tidy habit): the first thing a newcomer reads.
#[test]
fn every_source_file_says_what_it_is_for() {
    let root = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    let mut unexplained = Vec::new();
    let mut seen = 0;
    let mut pending = vec![root.join("crates")];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).expect("read a crates directory") {
            let path = entry.expect("a directory entry").path();
            let name = path
                .file_name()
                .and_then(|name| name.to_str())
                .unwrap_or("");
            if path.is_dir() {
                // Test data (corpora for the code intelligence tests) and
                // build output are not the project's sources.
                if !matches!(name, "data" | "target" | "node_modules") {
                    pending.push(path);
                }
            } else if name.ends_with(".rs")
                && path.components().any(|part| part.as_os_str() == "src")
            {
                seen += 1;
                let text = std::fs::read_to_string(&path).expect("read a source file");
                if !text.trim_start().starts_with("//!") {
                    unexplained.push(
                        path.strip_prefix(root)
                            .unwrap_or(&path)
                            .display()
                            .to_string(),
                    );
                }
            }
        }
    }
    assert!(seen > 100, "found only {seen} source files under crates/");
    unexplained.sort();
    assert!(
        unexplained.is_empty(),
        "source files without a `//!` opening saying what they are for:\n{}",
        unexplained.join("\n")
    );
}
