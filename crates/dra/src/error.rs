//! Selector errors, and readable text for the CEL crate's errors (whose
//! own messages print values with Rust's debug format).

use kube_cel::cel::ExecutionError;
use kube_cel::cel::objects::Value;

/// Why a selector could not be compiled or evaluated. Every message
/// names the expression (shortened when long).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    #[error(
        "selector {}: the expression is {len} bytes long, more than the limit of {limit}",
        shown(.expression)
    )]
    TooLong {
        expression: String,
        len: usize,
        limit: usize,
    },
    #[error("selector {}: syntax error: {message}", shown(.expression))]
    Syntax { expression: String, message: String },
    #[error("selector {}: {what} is not supported", shown(.expression))]
    Unsupported { expression: String, what: String },
    #[error(
        "selector {}: too complex: estimated cost {estimate} exceeds the limit of {limit}",
        shown(.expression)
    )]
    TooComplex {
        expression: String,
        estimate: u64,
        limit: u64,
    },
    #[error(
        "selector {}: evaluation exceeded the cost limit of {limit}",
        shown(.expression)
    )]
    CostLimit { expression: String, limit: u64 },
    #[error("selector {}: {message}", shown(.expression))]
    Evaluation { expression: String, message: String },
    #[error(
        "selector {}: the result is a {got}, not a bool",
        shown(.expression)
    )]
    NotBool { expression: String, got: String },
}

impl SelectorError {
    /// The expression the error is about.
    pub fn expression(&self) -> &str {
        match self {
            SelectorError::TooLong { expression, .. }
            | SelectorError::Syntax { expression, .. }
            | SelectorError::Unsupported { expression, .. }
            | SelectorError::TooComplex { expression, .. }
            | SelectorError::CostLimit { expression, .. }
            | SelectorError::Evaluation { expression, .. }
            | SelectorError::NotBool { expression, .. } => expression,
        }
    }
}

/// The expression as messages show it: in backquotes, on one line,
/// shortened past 160 characters.
fn shown(expression: &str) -> String {
    const SHOWN: usize = 160;
    let one_line: String = expression.split_whitespace().collect::<Vec<_>>().join(" ");
    match one_line.char_indices().nth(SHOWN) {
        Some((cut, _)) => format!("`{}...`", &one_line[..cut]),
        None => format!("`{one_line}`"),
    }
}

/// A CEL value as a user would write it (strings quoted, lists and maps
/// shortened), or its type when it has no literal form.
pub(crate) fn show_value(v: &Value) -> String {
    const ITEMS: usize = 4;
    match v {
        Value::Int(i) => i.to_string(),
        Value::UInt(u) => format!("{u}u"),
        Value::Float(f) => f.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Null => "null".to_string(),
        Value::String(s) => {
            let short: String = s.chars().take(64).collect();
            if short.len() < s.len() {
                format!("{short:?}...")
            } else {
                format!("{short:?}")
            }
        }
        Value::List(items) => {
            let mut parts: Vec<String> = items.iter().take(ITEMS).map(show_value).collect();
            if items.len() > ITEMS {
                parts.push("...".to_string());
            }
            format!("[{}]", parts.join(", "))
        }
        Value::Map(m) => {
            let mut keys: Vec<String> = m
                .map
                .keys()
                .map(|k| show_value(&k.clone().into()))
                .collect();
            keys.sort();
            let more = keys.len() > ITEMS;
            keys.truncate(ITEMS);
            let mut parts: Vec<String> = keys.into_iter().map(|k| format!("{k}: ...")).collect();
            if more {
                parts.push("...".to_string());
            }
            format!("{{{}}}", parts.join(", "))
        }
        other => format!("a {}", type_name(other)),
    }
}

/// The CEL type of a value (`int`, `map`, `kubernetes.Quantity`, ...).
pub(crate) fn type_name(v: &Value) -> String {
    match v {
        Value::Opaque(o) => o.runtime_type_name().to_string(),
        other => other.type_of().to_string(),
    }
}

/// The CEL crate's evaluation error in words.
pub(crate) fn describe(err: &ExecutionError) -> String {
    match err {
        ExecutionError::InvalidArgumentCount { expected, actual } => {
            format!("wrong number of arguments: expected {expected}, got {actual}")
        }
        ExecutionError::UnsupportedTargetType { target } => {
            format!("unsupported argument of type {}", type_name(target))
        }
        ExecutionError::NotSupportedAsMethod { method, target } => {
            format!("{method}() cannot be called on a {}", type_name(target))
        }
        ExecutionError::UnsupportedKeyType(v) => {
            format!("a {} cannot be a map key", type_name(v))
        }
        ExecutionError::UnexpectedType { got, want } => {
            format!("unexpected type: got {}, want {want}", plain_type(got))
        }
        ExecutionError::NoSuchKey(key) => format!("no such key: {key}"),
        ExecutionError::NoSuchOverload => {
            "no such overload: the operand types do not fit the operator or function".to_string()
        }
        ExecutionError::UndeclaredReference(name) => {
            format!("undeclared reference to '{name}'")
        }
        ExecutionError::MissingArgumentOrTarget => "missing argument or target".to_string(),
        ExecutionError::ValuesNotComparable(a, b) => {
            format!("{} cannot be compared to {}", show_value(a), show_value(b))
        }
        ExecutionError::UnsupportedUnaryOperator(op, v) => {
            format!("operator '{op}' does not apply to a {}", type_name(v))
        }
        ExecutionError::UnsupportedBinaryOperator(op, a, b) => format!(
            "operator '{op}' does not apply to a {} and a {}",
            type_name(a),
            type_name(b)
        ),
        ExecutionError::UnsupportedMapIndex(v) => {
            format!("a {} cannot index a map", type_name(v))
        }
        ExecutionError::UnsupportedListIndex(v) => {
            format!("a {} cannot index a list", type_name(v))
        }
        ExecutionError::UnsupportedIndex(index, on) => {
            format!("a {} cannot index a {}", type_name(index), type_name(on))
        }
        ExecutionError::UnsupportedFunctionCallIdentifierType(_) => {
            "unsupported function call".to_string()
        }
        ExecutionError::UnsupportedFieldsConstruction(_) => {
            "message construction is not supported".to_string()
        }
        ExecutionError::FunctionError { function, message } => {
            format!("{function}: {message}")
        }
        ExecutionError::DivisionByZero(_) => "division by zero".to_string(),
        ExecutionError::RemainderByZero(_) => "modulus by zero".to_string(),
        ExecutionError::Overflow(op, _, _) => format!("overflow in '{op}'"),
        ExecutionError::IndexOutOfBounds(i) => {
            format!("index {} out of bounds", show_value(i))
        }
        other => other.to_string(),
    }
}

/// `UnexpectedType`'s `got` is sometimes a value's debug text
/// (`Int(1)`): keep the type.
fn plain_type(got: &str) -> String {
    match got.split_once('(') {
        Some((head, _)) if !head.is_empty() && head.chars().all(|c| c.is_ascii_alphabetic()) => {
            head.to_ascii_lowercase()
        }
        _ => got.to_string(),
    }
}
