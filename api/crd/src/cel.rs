//! The CEL validation rules (`x-kubernetes-validations`) of the Queue CRD:
//! quotas and limits refused by kube-apiserver with the words of
//! Trainyard's own reader ([`crate::quantity::QuantityError`]), not with a
//! regular expression.
//!
//! What kube-apiserver (1.35 and later) evaluates, and why the rules are
//! written as they are:
//!
//! - A quota or limit value is `x-kubernetes-int-or-string`: `dyn` in CEL.
//!   The rules tell a string from an integer by `string(self) == self`
//!   (CEL's equality of a string and an integer is `false`, not an
//!   error), not by `type(self)`, which `kube-cel` (the tests' evaluator,
//!   and the test API server's) lacks.
//! - String functions (`isQuantity`, `quantity`, `==`) are given `self`,
//!   whose size the cost estimator bounds by `maxLength` (×4 bytes for an
//!   int-or-string since Kubernetes 1.34), never `string(self)`, whose
//!   size it cannot bound. Messages are built with `format`, whose cost
//!   does not depend on its arguments' sizes, not with `+`.
//! - Worst cases, by the estimator's rules: a value rule costs under 300
//!   (a string of at most [`MAX_QUANTITY_LENGTH`] × 4 bytes, traversed a
//!   few times at 0.1 a byte) × [`MAX_RESOURCES`] values, under 10,000;
//!   the limit-against-quota rule and its message iterate the quota map
//!   ([`MAX_RESOURCES`] entries) and stay under 100,000. kube-apiserver
//!   refuses a CRD with an expression estimated above 10,000,000 (or all
//!   of them above 100,000,000), and stops one that costs more than
//!   1,000,000 when it runs.
//!
//! A YAML number with a fraction (`2.5`) is not an integer: kube-apiserver
//! refuses it by type (`must be of type integer,string`) before any rule
//! runs, and no rule can change those words. The field descriptions (what
//! `kubectl explain` shows) say to quote it.

use schemars::{Schema, SchemaGenerator, json_schema};
use serde_json::{Value, json};

use crate::quantity::EXPECTED_QUANTITY;
use crate::schema::MAX_RESOURCES;

/// Longest quota or limit string. Bounds the CEL cost estimate of the
/// rules on each value (kube-apiserver refuses a CRD whose rules could
/// cost too much).
pub const MAX_QUANTITY_LENGTH: u64 = 64;

/// `x` is a string (an int-or-string value is either a string or an
/// integer; see the module's notes).
fn is_string(x: &str) -> String {
    format!("string({x}) == {x}")
}

/// `x` is a valid quantity: an integer, or a string that parses.
fn valid(x: &str) -> String {
    format!("(string({x}) != {x} || isQuantity({x}))")
}

/// `x` (a valid quantity) as a CEL `Quantity`.
fn as_quantity(x: &str) -> String {
    format!(
        "({} ? quantity({x}) : quantity('0').add({x}))",
        is_string(x)
    )
}

/// The rules on one quota value, or on one limit value when `unlimited`
/// (the word `unlimited` is then accepted, and named in the messages).
fn value_rules(unlimited: bool) -> Value {
    // Inside CEL's single-quoted strings a double quote needs no escape.
    let (word, or_word) = if unlimited {
        ("self == 'unlimited' || ", ", or \"unlimited\"")
    } else {
        ("", "")
    };
    json!([
        {
            "rule": format!("{word}string(self) != self || isQuantity(self)"),
            "messageExpression": format!(
                "'invalid quantity \"%s\"; {EXPECTED_QUANTITY}{or_word}'.format([self])"
            ),
            "message": format!("invalid quantity; {EXPECTED_QUANTITY}{or_word}"),
        },
        {
            "rule": format!(
                "{} ? ({word}!isQuantity(self) || quantity(self).sign() >= 0) : self >= 0",
                is_string("self")
            ),
            "messageExpression": format!(
                "'quantity \"%s\" is negative; expected an amount of zero or more{or_word}'.format([self])"
            ),
            "message": format!(
                "a quantity is negative; expected an amount of zero or more{or_word}"
            ),
        },
    ])
}

fn value_schema(unlimited: bool) -> Schema {
    let description = if unlimited {
        "A Kubernetes quantity (a whole number, or a string such as \"500m\" or \"64Gi\"), or \"unlimited\". Quote a number with a fraction (\"2.5\"): the API server accepts only whole numbers unquoted."
    } else {
        "A Kubernetes quantity: a whole number, or a string such as \"500m\" or \"64Gi\". Quote a number with a fraction (\"2.5\"): the API server accepts only whole numbers unquoted."
    };
    json_schema!({
        "description": description,
        "x-kubernetes-int-or-string": true,
        "anyOf": [{ "type": "integer" }, { "type": "string" }],
        "maxLength": MAX_QUANTITY_LENGTH,
        "x-kubernetes-validations": value_rules(unlimited),
    })
}

fn map_schema(description: &str, unlimited: bool) -> Schema {
    json_schema!({
        "description": description,
        "type": "object",
        "default": {},
        "maxProperties": MAX_RESOURCES,
        "additionalProperties": value_schema(unlimited),
    })
}

/// Schema of `Queue.spec.quota` (`schema_with`).
pub fn quota_map(_: &mut SchemaGenerator) -> Schema {
    map_schema("Guaranteed resources: resource name -> quantity.", false)
}

/// Schema of `Queue.spec.limit` (`schema_with`).
pub fn limit_map(_: &mut SchemaGenerator) -> Schema {
    map_schema(
        "Most the queue may use: resource name -> quantity or `unlimited`.\nAbsent resources are unlimited.",
        true,
    )
}

/// The rule on `Queue.spec`: each limit at least the quota of the same
/// resource, its message naming one resource that is not (CEL leaves a
/// map's order open: when several are, any one), with both amounts as
/// written (`quota 8 nvidia.com/gpu is above its own limit 4`,
/// the reader's words). Values that are not quantities are left to the
/// rules on the values.
pub fn limit_covers_quota() -> Value {
    let q = "self.quota[r]";
    let l = "self.limit[r]";
    let below = format!(
        "{l} != 'unlimited' && {} && {} && {}.compareTo({}) < 0",
        valid(q),
        valid(l),
        as_quantity(l),
        as_quantity(q)
    );
    let each = format!(
        "self.quota.filter(r, r in self.limit && {below}).map(r, 'quota %s %s is above its own limit %s'.format([string(self.quota[r]), r, string(self.limit[r])]))"
    );
    json!({
        "rule": format!(
            "!has(self.quota) || !has(self.limit) || !self.quota.exists(r, r in self.limit && {below})"
        ),
        "messageExpression": format!(
            "'%s; each limit must be at least the quota of the same resource (or \"unlimited\")'.format([{each}[0]])"
        ),
        "message": "each limit must be at least the quota of the same resource (or \"unlimited\")",
        "fieldPath": ".limit",
    })
}

/// Adds [`limit_covers_quota`] to the schema of `Queue.spec` (`transform`).
pub fn queue_spec_rules(schema: &mut Schema) {
    schema.insert(
        "x-kubernetes-validations".into(),
        Value::Array(vec![limit_covers_quota()]),
    );
}
