//! Messages as JSON in the proto3 JSON mapping (what grpcurl and Python's
//! `json_format` print: camelCase field names, enums by name), read from
//! the API's own descriptors so the names are the protos'. Every field is
//! written, zero or not. One function for the CLI's `-o json|yaml` (64-bit
//! integers as strings, as the mapping says) and the dashboard's JSON
//! (as numbers: milliseconds and milli-GPUs stay far below 2^53).

use prost_reflect::{DescriptorPool, DynamicMessage, ReflectMessage, SerializeOptions};

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
        let (dynamic, fail) = self.dynamic(message, name)?;
        dynamic
            .serialize_with_options(serde_json::value::Serializer, &self.options)
            .map_err(|e| fail(e.to_string()))
    }

    /// `message` read through its descriptor (type `name`), and how to
    /// say what went wrong printing it.
    fn dynamic<M: prost::Message>(
        &self,
        message: &M,
        name: &str,
    ) -> Result<(DynamicMessage, impl Fn(String) -> JsonError + use<M>), JsonError> {
        let full = format!("trainyard.v1alpha1.{name}");
        let fail = move |error: String| JsonError {
            message: full.clone(),
            error,
        };
        let desc = self
            .pool
            .get_message_by_name(&format!("trainyard.v1alpha1.{name}"))
            .ok_or_else(|| fail("no such message in the API's descriptors".into()))?;
        let dynamic = DynamicMessage::decode(desc, message.encode_to_vec().as_slice())
            .map_err(|e| fail(e.to_string()))?;
        Ok((dynamic, fail))
    }
}

impl Printer {
    /// `message` as JSON text, each element of its repeated message field
    /// `list` (by its JSON name) extended with the fields `extra` gives
    /// for its position. Written straight to text (no `serde_json::Value`
    /// between): tens of thousands of jobs print in half the time.
    pub fn text_with_extras<M: prost::Message>(
        &self,
        message: &M,
        name: &str,
        list: &str,
        mut extra: impl FnMut(usize) -> serde_json::Map<String, serde_json::Value>,
    ) -> Result<String, JsonError> {
        let (mut dynamic, fail) = self.dynamic(message, name)?;
        let field = dynamic
            .descriptor()
            .fields()
            .find(|f| f.json_name() == list)
            .ok_or_else(|| fail(format!("no field {list}")))?;
        let items = match dynamic.take_field(&field) {
            Some(prost_reflect::Value::List(items)) => items,
            _ => Vec::new(),
        };
        let write = |out: &mut Vec<u8>, m: &DynamicMessage| {
            let mut ser = serde_json::Serializer::new(out);
            m.serialize_with_options(&mut ser, &self.options)
                .map_err(|e| fail(e.to_string()))
        };
        let mut head = Vec::new();
        write(&mut head, &dynamic)?;
        // The list, now empty, is written `"list":[]`; string values
        // escape their quotes, so the first such run is the field.
        let marker = format!("\"{list}\":[]");
        let at = find(&head, marker.as_bytes())
            .ok_or_else(|| fail(format!("{list} not written")))?
            + marker.len()
            - 1;
        let mut out = Vec::with_capacity(head.len() + items.len() * 400);
        out.extend_from_slice(&head[..at]);
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            let Some(m) = item.as_message() else {
                return Err(fail(format!("{list} is not a list of messages")));
            };
            write(&mut out, m)?;
            let add = extra(i);
            if !add.is_empty() && out.last() == Some(&b'}') {
                out.pop();
                for (k, v) in add {
                    if out.last() != Some(&b'{') {
                        out.push(b',');
                    }
                    serde_json::to_writer(&mut out, &k).map_err(|e| fail(e.to_string()))?;
                    out.push(b':');
                    serde_json::to_writer(&mut out, &v).map_err(|e| fail(e.to_string()))?;
                }
                out.push(b'}');
            }
        }
        out.extend_from_slice(&head[at..]);
        String::from_utf8(out).map_err(|e| fail(e.to_string()))
    }
}

/// Where `needle` first occurs in `hay`.
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
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
    fn a_list_printed_with_extras_is_the_value_with_them() {
        let mut m = message();
        m.jobs.push(pb::Job {
            name: "b\"jobs\":[]".into(),
            ..Default::default()
        });
        let p = Printer::new(false).expect("descriptors");
        let text = p
            .text_with_extras(&m, "ListJobsResponse", "jobs", |i| {
                let mut add = serde_json::Map::new();
                if i == 0 {
                    add.insert("startMs".into(), 5.into());
                }
                add
            })
            .expect("text");
        let mut want = p.value(&m, "ListJobsResponse").expect("value");
        want["jobs"][0]["startMs"] = 5.into();
        let got: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        assert_eq!(got, want);
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
