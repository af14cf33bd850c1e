//! OpenAPI schemas of the scalar types users write (quantities, limits,
//! durations), for the generated CustomResourceDefinitions.
//!
//! Kubernetes accepts a quantity written as a YAML number or a string, so
//! these are `x-kubernetes-int-or-string` with the string form checked by a
//! pattern, as `controller-gen` writes `resource.Quantity`. The reader in
//! this crate checks more (units per resource, overflow) and names the
//! field; the schema is the API server's first, coarser line.
//!
//! `Queue.spec.quota` and `Queue.spec.limit` are the exception: their
//! values are checked by CEL rules in the reader's words ([`crate::cel`]),
//! not by a pattern, whose failure kube-apiserver reports as the regular
//! expression itself (and which an integer never meets).
//!
//! One difference: the reader accepts a decimal number of seconds written
//! as a YAML float (`minRuntime: 1.5`); an API server holding the CRD
//! accepts integers and strings only (`"1.5"`), as int-or-string does.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};

use crate::duration::RawDuration;
use crate::quantity::RawQuantity;
use crate::queue::LimitValue;

/// A non-negative Kubernetes quantity (`8`, `500m`, `64Gi`, `1e3`).
pub const QUANTITY_PATTERN: &str = r"^(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";

/// A quantity or the word `unlimited`.
pub const LIMIT_PATTERN: &str = r"^(unlimited|(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?)$";

/// Seconds, or a number with one unit (`90`, `"30m"`, `"1.5h"`).
pub const DURATION_PATTERN: &str = r"^\s*(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))\s*(ms|s|m|h|d)?\s*$";

/// Most resources one quota or limit may name. Bounded so the API server
/// can estimate the cost of the CEL rule that compares them.
pub const MAX_RESOURCES: u64 = 32;

fn int_or_string(pattern: &str, description: &str) -> Schema {
    json_schema!({
        "description": description,
        "x-kubernetes-int-or-string": true,
        "anyOf": [{ "type": "integer" }, { "type": "string" }],
        "pattern": pattern,
    })
}

impl JsonSchema for RawQuantity {
    fn schema_name() -> Cow<'static, str> {
        "Quantity".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        int_or_string(
            QUANTITY_PATTERN,
            "A Kubernetes quantity: a whole number, or a string such as \"500m\" or \"64Gi\".",
        )
    }
}

impl JsonSchema for LimitValue {
    fn schema_name() -> Cow<'static, str> {
        "Limit".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        int_or_string(LIMIT_PATTERN, "A Kubernetes quantity, or \"unlimited\".")
    }
}

impl JsonSchema for RawDuration {
    fn schema_name() -> Cow<'static, str> {
        "Duration".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        int_or_string(
            DURATION_PATTERN,
            "Whole seconds, or a number with one unit (ms, s, m, h, d) such as \"30m\".",
        )
    }
}
