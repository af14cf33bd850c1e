//! Messages as JSON in the proto3 JSON mapping (what grpcurl and Python's
//! `json_format` print: camelCase field names, enums by name), read from
//! the API's own descriptors so the names are the protos'. Every field is
//! written, zero or not. One function for the CLI's `-o json|yaml` (64-bit
//! integers as strings, as the mapping says) and the dashboard's JSON
//! (as numbers: milliseconds and milli-GPUs stay far below 2^53).

use prost_reflect::{DescriptorPool, DynamicMessage, SerializeOptions};

/// A message could not be printed (a bug: the descriptors are the
/// messages' own).
#[derive(Debug, thiserror::Error)]
#[error("printing {message} as JSON: {error}")]
pub struct JsonError {
    pub message: String,
    pub error: String,
}

/// The API's descriptors, decoded once per holder.
#[derive(Clone, Debug)]
pub struct Printer {
    pool: DescriptorPool,
    options: SerializeOptions,
}

impl Printer {
    /// A printer writing 64-bit integers as strings (the proto3 mapping)
    /// when `strings`, else as numbers.
    pub fn new(strings: bool) -> Result<Printer, JsonError> {
        let pool = DescriptorPool::decode(crate::FILE_DESCRIPTOR_SET).map_err(|e| JsonError {
            message: "the API's descriptors".into(),
            error: e.to_string(),
        })?;
        Ok(Printer {
            pool,
            options: SerializeOptions::new()
                .skip_default_fields(false)
                .stringify_64_bit_integers(strings),
        })
    }

    /// `message` (of proto type `name`, e.g. `ListJobsResponse`) as JSON.
    pub fn value<M: prost::Message>(
        &self,
        message: &M,
        name: &str,
    ) -> Result<serde_json::Value, JsonError> {
        let full = format!("trainyard.v1alpha1.{name}");
        let fail = |error: String| JsonError {
            message: full.clone(),
            error,
        };
        let desc = self
            .pool
            .get_message_by_name(&full)
            .ok_or_else(|| fail("no such message in the API's descriptors".into()))?;
        let dynamic = DynamicMessage::decode(desc, message.encode_to_vec().as_slice())
            .map_err(|e| fail(e.to_string()))?;
        dynamic
            .serialize_with_options(serde_json::value::Serializer, &self.options)
            .map_err(|e| fail(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pb;

    fn message() -> pb::ListJobsResponse {
        pb::ListJobsResponse {
            cycle: Some(pb::Cycle {
                number: 3,
                time_ms: 1_700_000_000_000,
            }),
            jobs: vec![pb::Job {
                name: "a".into(),
                namespace: "ml".into(),
                state: pb::JobState::Pending as i32,
                pods: 2,
                ..Default::default()
            }],
        }
    }

    #[test]
    fn proto_json_names_zero_fields_and_64_bit_integers() {
        let v = Printer::new(true)
            .expect("descriptors")
            .value(&message(), "ListJobsResponse")
            .expect("json");
        assert_eq!(v["cycle"]["timeMs"], "1700000000000");
        assert_eq!(v["jobs"][0]["state"], "JOB_STATE_PENDING");
        assert_eq!(v["jobs"][0]["podsBound"], 0);
        assert_eq!(v["jobs"][0]["reason"], "");
        let v = Printer::new(false)
            .expect("descriptors")
            .value(&message(), "ListJobsResponse")
            .expect("json");
        assert_eq!(v["cycle"]["timeMs"], 1_700_000_000_000i64);
    }

    #[test]
    fn an_unknown_message_is_named() {
        let e = Printer::new(false)
            .expect("descriptors")
            .value(&message(), "Nope")
            .expect_err("unknown");
        assert_eq!(
            e.to_string(),
            "printing trainyard.v1alpha1.Nope as JSON: no such message in the API's descriptors"
        );
    }
}
