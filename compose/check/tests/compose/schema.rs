//! The compose file against the compose-spec JSON schema (vendored in compose/schema/).

use crate::{compose, interpolate_all, read, services, Json, COMPOSE};

#[test]
fn compose_file_is_valid_against_the_compose_spec_schema() {
    let schema: Json = serde_json::from_str(&read("compose/schema/compose-spec.json")).expect("schema is JSON");
    let validator = jsonschema::validator_for(&schema).expect("the compose-spec schema compiles");
    let raw = compose();
    for (what, doc) in [("as written", raw.clone()), ("interpolated with the defaults", interpolate_all(&raw))] {
        let errors: Vec<String> = validator.iter_errors(&doc).map(|e| format!("{}: {e}", e.instance_path())).collect();
        assert!(errors.is_empty(), "{COMPOSE} ({what}) violates compose-spec.json:\n{}", errors.join("\n"));
        println!("{COMPOSE} ({what}): valid against compose/schema/compose-spec.json");
    }
    println!("services: {}", services(&raw).keys().cloned().collect::<Vec<_>>().join(", "));
}
