//! Answers as JSON or YAML: the message in the proto3 JSON mapping
//! (what grpcurl and Python's `json_format` print: camelCase field names,
//! enums by name, 64-bit integers as strings), read from the API's own
//! descriptors, so the names are the protos' and stay as they are. Every
//! field is written, zero or not, so a script's `.jobs[0].podsBound` is
//! always there.

use anyhow::{Context, Result};

/// `message` (of proto type `name`, e.g. `ListJobsResponse`) as a JSON
/// value, by the API's printer (`trainyard_api::json`).
pub fn to_json<M: prost::Message>(message: &M, name: &str) -> Result<serde_json::Value> {
    Ok(trainyard_api::json::Printer::new(true)?.value(message, name)?)
}

/// `message` as pretty JSON, one trailing newline.
pub fn json<M: prost::Message>(message: &M, name: &str) -> Result<String> {
    Ok(serde_json::to_string_pretty(&to_json(message, name)?)? + "\n")
}

/// `message` as one line of JSON (for streams: one object per line).
pub fn json_line<M: prost::Message>(message: &M, name: &str) -> Result<String> {
    Ok(serde_json::to_string(&to_json(message, name)?)? + "\n")
}

/// `message` as YAML.
pub fn yaml<M: prost::Message>(message: &M, name: &str) -> Result<String> {
    serde_saphyr::to_string(&to_json(message, name)?).context("as YAML")
}

#[cfg(test)]
mod tests {
    use super::*;
    use trainyard_api::pb;

    /// The printer itself is tested in `trainyard_api::json`; here, that
    /// the CLI writes 64-bit integers as strings and YAML keeps zeros.
    #[test]
    fn strings_for_64_bit_integers_and_zero_fields_in_yaml() {
        let m = pb::Cycle {
            number: 3,
            time_ms: 0,
        };
        let v = to_json(&m, "Cycle").expect("json");
        assert_eq!(v["number"], "3");
        let y = yaml(&m, "Cycle").expect("yaml");
        assert!(y.contains("timeMs: \"0\""), "{y}");
    }
}
