//! The DRA CEL environment: the functions a selector may call, the
//! `device` variable built from a model [`Device`], and evaluation on a
//! budget.

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use kube_cel::KubeCelExt;
use kube_cel::cel::common::ast::{CallExpr, Expr};
use kube_cel::cel::objects::{Key, Map, Opaque, OptionalValue, Value};
use kube_cel::cel::parser::Expression;
use kube_cel::cel::{Context, ExecutionError, FunctionContext, ResolveResult};
use trainyard_model::dra::{AttrValue, Device};

use crate::MAX_COST;
use crate::error::{SelectorError, describe, type_name};
use crate::selector::Selector;

/// Names of the functions the compiler inserts; `@` keeps them out of
/// reach of expressions (not a CEL identifier character).
pub(crate) const COST: &str = "@cost";
pub(crate) const STEP: &str = "@step";
pub(crate) const DOMAIN: &str = "@domain";
pub(crate) const OPT_SELECT: &str = "@optselect";
const BUDGET: &str = "@budget";

/// The DRA CEL environment (functions registered once): build it once
/// and use it for many devices and selectors.
pub struct Evaluator {
    root: Context<'static>,
}

/// A device as the `device` variable of a selector, built once per device
/// by [`Evaluator::device`] and shared by every selector evaluated on it.
#[derive(Clone, Debug)]
pub struct DeviceInput(Value);

impl Default for Evaluator {
    fn default() -> Self {
        Self::new()
    }
}

impl Evaluator {
    pub fn new() -> Self {
        let mut root = Context::default();
        root.register_all();
        root.add_function("cel.bind", bind);
        root.add_function(COST, charge_size);
        root.add_function(STEP, charge_step);
        root.add_function(DOMAIN, domain);
        root.add_function(OPT_SELECT, optional_select);
        // Replaces the library's: refuses a range larger than the budget
        // left before allocating it.
        root.add_function("lists.range", bounded_range);
        Evaluator { root }
    }

    /// The `device` variable for `device`.
    pub fn device(&self, device: &Device) -> DeviceInput {
        let mut attributes: HashMap<String, HashMap<Key, Value>> = HashMap::new();
        for (qualified, value) in &device.attributes {
            let (domain, name) = split(qualified, &device.driver);
            let value = match value {
                AttrValue::Int(i) => Value::Int(*i),
                AttrValue::Bool(b) => Value::Bool(*b),
                AttrValue::String(s) => Value::String(Arc::new(s.clone())),
                AttrValue::Version(v) => self.version(v),
            };
            attributes
                .entry(domain.to_string())
                .or_default()
                .insert(key(name), value);
        }
        let mut capacity: HashMap<String, HashMap<Key, Value>> = HashMap::new();
        for (qualified, c) in &device.capacity {
            let (domain, name) = split(qualified, &device.driver);
            capacity
                .entry(domain.to_string())
                .or_default()
                .insert(key(name), self.quantity(c.value));
        }
        let nested = |m: HashMap<String, HashMap<Key, Value>>| {
            map(m
                .into_iter()
                .map(|(domain, names)| (key(&domain), map(names)))
                .collect())
        };
        let fields = HashMap::from([
            (
                key("driver"),
                Value::String(Arc::new(device.driver.to_string())),
            ),
            (key("allowMultipleAllocations"), Value::Bool(device.multi)),
            (key("attributes"), nested(attributes)),
            (key("capacity"), nested(capacity)),
        ]);
        DeviceInput(map(fields))
    }

    /// Whether `selector` accepts `device`.
    pub fn matches(
        &self,
        selector: &Selector,
        device: &DeviceInput,
    ) -> Result<bool, SelectorError> {
        let budget = Arc::new(Budget::new(MAX_COST));
        let mut scope = self.root.new_inner_scope();
        scope.add_variable_from_value("device", device.0.clone());
        scope.add_variable_from_value(BUDGET, Value::Opaque(budget.clone()));
        let result = catch_unwind(AssertUnwindSafe(|| {
            Value::resolve(selector.program(), &scope)
        }));
        let expression = selector.expression().to_string();
        if budget.exhausted.load(Ordering::Relaxed) {
            return Err(SelectorError::CostLimit {
                expression,
                limit: MAX_COST,
            });
        }
        match result {
            Ok(Ok(Value::Bool(b))) => Ok(b),
            Ok(Ok(other)) => Err(SelectorError::NotBool {
                expression,
                got: type_name(&other),
            }),
            Ok(Err(e)) => Err(SelectorError::Evaluation {
                expression,
                message: describe(&e),
            }),
            Err(_) => Err(SelectorError::Evaluation {
                expression,
                message: "the CEL evaluator failed on this expression".to_string(),
            }),
        }
    }

    /// A capacity in milli-units as a Kubernetes quantity, built from the
    /// exact decimal text (`2`, `1500m`).
    fn quantity(&self, milli: u64) -> Value {
        let text = if milli.is_multiple_of(1000) {
            (milli / 1000).to_string()
        } else {
            format!("{milli}m")
        };
        // The text always parses; were it not to, the whole units as an
        // int are the nearest thing.
        self.call("quantity", &[Value::String(Arc::new(text))])
            .unwrap_or(Value::Int((milli / 1000) as i64))
    }

    /// A version attribute as a semver value: strict semver 2.0 as
    /// Kubernetes validates it, else leniently (`v1.2`), else the string.
    fn version(&self, text: &str) -> Value {
        let s = Value::String(Arc::new(text.to_string()));
        self.call("semver", std::slice::from_ref(&s))
            .or_else(|_| self.call("semver", &[s.clone(), Value::Bool(true)]))
            .unwrap_or(s)
    }

    /// Calls a registered function on values.
    fn call(&self, function: &str, args: &[Value]) -> ResolveResult {
        let mut scope = self.root.new_inner_scope();
        let mut exprs = Vec::with_capacity(args.len());
        for (i, a) in args.iter().enumerate() {
            let name = format!("@arg{i}");
            scope.add_variable_from_value(name.clone(), a.clone());
            exprs.push(Expression {
                id: 0,
                expr: Expr::Ident(name),
            });
        }
        let call = Expression {
            id: 0,
            expr: Expr::Call(CallExpr {
                func_name: function.to_string(),
                target: None,
                args: exprs,
            }),
        };
        Value::resolve(&call, &scope)
    }
}

/// `domain/name`; a name without a domain belongs to the driver's.
fn split<'a>(qualified: &'a str, driver: &'a str) -> (&'a str, &'a str) {
    qualified.split_once('/').unwrap_or((driver, qualified))
}

fn key(s: &str) -> Key {
    Key::String(Arc::new(s.to_string()))
}

fn map(m: HashMap<Key, Value>) -> Value {
    Value::Map(Map { map: Arc::new(m) })
}

/// What is left of one evaluation's cost budget.
#[derive(Debug)]
struct Budget {
    left: AtomicU64,
    exhausted: AtomicBool,
}

impl Budget {
    fn new(limit: u64) -> Self {
        Budget {
            left: AtomicU64::new(limit),
            exhausted: AtomicBool::new(false),
        }
    }

    fn left(&self) -> u64 {
        self.left.load(Ordering::Relaxed)
    }

    fn charge(&self, cost: u64) -> Result<(), ExecutionError> {
        let left = self.left();
        if cost > left {
            self.left.store(0, Ordering::Relaxed);
            self.exhausted.store(true, Ordering::Relaxed);
            return Err(ExecutionError::function_error(
                "cost",
                format!("the cost limit of {MAX_COST} is exceeded"),
            ));
        }
        self.left.store(left - cost, Ordering::Relaxed);
        Ok(())
    }
}

impl PartialEq for Budget {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}
impl Eq for Budget {}

impl Opaque for Budget {
    fn runtime_type_name(&self) -> &str {
        "trainyard.Budget"
    }
}

/// Runs `f` with the evaluation's budget.
fn with_budget<T>(
    ftx: &FunctionContext,
    f: impl FnOnce(&Budget) -> Result<T, ExecutionError>,
) -> Result<T, ExecutionError> {
    let val = ftx
        .ptx
        .get_variable(BUDGET)
        .ok_or_else(|| ExecutionError::undeclared_reference(BUDGET))?;
    let value = Value::try_from(val.as_ref())?;
    match &value {
        Value::Opaque(o) => match o.downcast_ref::<Budget>() {
            Some(b) => f(b),
            None => Err(ExecutionError::undeclared_reference(BUDGET)),
        },
        _ => Err(ExecutionError::undeclared_reference(BUDGET)),
    }
}

fn size(v: &Value) -> u64 {
    match v {
        Value::String(s) => s.len() as u64,
        Value::Bytes(b) => b.len() as u64,
        Value::List(l) => l.len() as u64,
        Value::Map(m) => m.map.len() as u64,
        _ => 0,
    }
}

/// `@cost(e)`: evaluates `e` and charges 1 plus the size of its value.
fn charge_size(ftx: &FunctionContext) -> ResolveResult {
    let [arg] = ftx.args else {
        return Err(ExecutionError::invalid_argument_count(1, ftx.args.len()));
    };
    let value = ftx.ptx.resolve(arg)?;
    with_budget(ftx, |b| b.charge(1 + size(&value)))?;
    Ok(value)
}

/// `@step(e)`: one comprehension step: charges 1, then evaluates `e`.
fn charge_step(ftx: &FunctionContext) -> ResolveResult {
    let [arg] = ftx.args else {
        return Err(ExecutionError::invalid_argument_count(1, ftx.args.len()));
    };
    with_budget(ftx, |b| b.charge(1))?;
    ftx.ptx.resolve(arg)
}

/// `@domain(device.attributes, d)`: the domain's map, empty when the
/// device has none.
fn domain(ftx: &FunctionContext) -> ResolveResult {
    let [outer, domain] = ftx.args else {
        return Err(ExecutionError::invalid_argument_count(2, ftx.args.len()));
    };
    let outer = ftx.ptx.resolve(outer)?;
    let domain = ftx.ptx.resolve(domain)?;
    match (&outer, &domain) {
        (Value::Map(m), Value::String(d)) => Ok(m
            .map
            .get(&Key::String(d.clone()))
            .cloned()
            .unwrap_or_else(|| map(HashMap::new()))),
        (Value::Map(_), other) => Err(ExecutionError::function_error(
            "device.attributes",
            format!("a domain must be a string, not a {}", type_name(other)),
        )),
        _ => Err(ExecutionError::NoSuchOverload),
    }
}

/// `@optselect(e, "f")` for `e.?f`: `optional.of(e.f)` when `e` (or the
/// value of optional `e`) is a map holding `f`, else `optional.none()`.
fn optional_select(ftx: &FunctionContext) -> ResolveResult {
    let [operand, field] = ftx.args else {
        return Err(ExecutionError::invalid_argument_count(2, ftx.args.len()));
    };
    let operand = ftx.ptx.resolve(operand)?;
    let Value::String(field) = ftx.ptx.resolve(field)? else {
        return Err(ExecutionError::function_error(
            "_?._",
            "the field must be a name",
        ));
    };
    let inner = match &operand {
        Value::Opaque(o) if o.runtime_type_name() == "optional_type" => {
            match o.downcast_ref::<OptionalValue>().and_then(|v| v.value()) {
                Some(v) => v.clone(),
                None => return Ok(Value::Opaque(Arc::new(OptionalValue::none()))),
            }
        }
        other => other.clone(),
    };
    match inner {
        Value::Map(m) => Ok(Value::Opaque(Arc::new(
            match m.map.get(&Key::String(field)) {
                Some(v) => OptionalValue::of(v.clone()),
                None => OptionalValue::none(),
            },
        ))),
        other => Err(ExecutionError::function_error(
            "_?._",
            format!("a {} has no fields", type_name(&other)),
        )),
    }
}

/// `cel.bind(name, init, body)`: `body` with `name` bound to `init`.
fn bind(ftx: &FunctionContext) -> ResolveResult {
    let [name, init, body] = ftx.args else {
        return Err(ExecutionError::function_error(
            "cel.bind",
            format!(
                "takes 3 arguments (name, value, body), got {}",
                ftx.args.len()
            ),
        ));
    };
    let Expr::Ident(name) = &name.expr else {
        return Err(ExecutionError::function_error(
            "cel.bind",
            "the first argument must be a variable name",
        ));
    };
    let init = ftx.ptx.resolve(init)?;
    let mut inner = ftx.ptx.new_inner_scope();
    inner.add_variable_from_value(name.clone(), init);
    inner.resolve(body)
}

/// `lists.range(n)`: `[0, ..., n-1]`, refused when `n` exceeds the budget
/// left.
fn bounded_range(ftx: &FunctionContext) -> ResolveResult {
    let [n] = ftx.args else {
        return Err(ExecutionError::invalid_argument_count(1, ftx.args.len()));
    };
    let n = match ftx.ptx.resolve(n)? {
        Value::Int(n) => n,
        other => {
            return Err(ExecutionError::function_error(
                "lists.range",
                format!("expects an int, got a {}", type_name(&other)),
            ));
        }
    };
    if n < 0 {
        return Err(ExecutionError::function_error(
            "lists.range",
            "range argument must be non-negative",
        ));
    }
    with_budget(ftx, |b| b.charge(n as u64))?;
    Ok(Value::List(Arc::new((0..n).map(Value::Int).collect())))
}
