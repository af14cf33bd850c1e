//! One compiled selector expression.

use kube_cel::cel::common::ast::{
    CallExpr, ComprehensionExpr, EntryExpr, Expr, ListExpr, MapEntryExpr, MapExpr, SelectExpr,
};
use kube_cel::cel::parser::{Expression, ParseErrors, Parser};
use trainyard_model::dra::Device;

use crate::env::{COST, DOMAIN, Evaluator, OPT_SELECT, STEP};
use crate::error::SelectorError;
use crate::{MAX_COST, MAX_EXPRESSION_LEN, cost};

/// A compiled `CELDeviceSelector` expression.
#[derive(Debug)]
pub struct Selector {
    expression: String,
    /// The parsed expression, instrumented (see [`instrument`]).
    program: Expression,
    estimate: u64,
}

impl Selector {
    /// Parses and checks `expression`: its length, its syntax, the
    /// constructs supported, and its static cost estimate.
    pub fn compile(expression: &str) -> Result<Selector, SelectorError> {
        let owned = || expression.to_string();
        if expression.len() > MAX_EXPRESSION_LEN {
            return Err(SelectorError::TooLong {
                expression: owned(),
                len: expression.len(),
                limit: MAX_EXPRESSION_LEN,
            });
        }
        let parsed = Parser::default()
            .enable_optional_syntax(true)
            .parse(expression)
            .map_err(|e| SelectorError::Syntax {
                expression: owned(),
                message: syntax_message(&e),
            })?;
        let estimate = cost::estimate(&parsed);
        if estimate > MAX_COST {
            return Err(SelectorError::TooComplex {
                expression: owned(),
                estimate,
                limit: MAX_COST,
            });
        }
        let program = instrument(parsed, false).map_err(|what| SelectorError::Unsupported {
            expression: owned(),
            what: what.to_string(),
        })?;
        Ok(Selector {
            expression: owned(),
            program,
            estimate,
        })
    }

    /// Whether the selector accepts `device`. Builds the environment for
    /// this one call: to evaluate many, use an [`Evaluator`].
    pub fn matches(&self, device: &Device) -> Result<bool, SelectorError> {
        let env = Evaluator::new();
        env.matches(self, &env.device(device))
    }

    /// The expression as written.
    pub fn expression(&self) -> &str {
        &self.expression
    }

    /// The static cost estimate (see [`cost`]).
    pub fn estimated_cost(&self) -> u64 {
        self.estimate
    }

    pub(crate) fn program(&self) -> &Expression {
        &self.program
    }
}

/// The parser's errors on one line each, without its `ERROR: <input>:`
/// prefix and source excerpt: `at 1:17: mismatched input ...`.
fn syntax_message(errors: &ParseErrors) -> String {
    let parts: Vec<String> = errors
        .errors
        .iter()
        .map(|e| {
            let msg = e.msg.strip_prefix("Syntax error: ").unwrap_or(&e.msg);
            format!("at {}:{}: {msg}", e.pos.0, e.pos.1)
        })
        .collect();
    if parts.is_empty() {
        "invalid expression".to_string()
    } else {
        parts.join("; ")
    }
}

fn node(expr: Expr) -> Expression {
    Expression { id: 0, expr }
}

fn call(func: &str, args: Vec<Expression>) -> Expression {
    node(Expr::Call(CallExpr {
        func_name: func.to_string(),
        target: None,
        args,
    }))
}

/// `device.attributes` or `device.capacity`.
fn is_device_map(e: &Expression) -> bool {
    match &e.expr {
        Expr::Select(s) => {
            !s.test
                && (s.field == "attributes" || s.field == "capacity")
                && matches!(&s.operand.expr, Expr::Ident(d) if d == "device")
        }
        _ => false,
    }
}

/// Rewrites a parsed expression for the DRA environment:
///
/// - `device.attributes[d]` and `device.capacity[d]` read an unknown
///   domain as an empty map (`@domain`), `[?d]` as `optional.of({})`;
/// - `m.?f` on a map without `f` is `optional.none()` (the evaluator's
///   own fails with `no such key`);
/// - every function call and `+` is charged the size of its result
///   (`@cost`), every comprehension step 1 (`@step`);
/// - message construction (`Type{...}`), which the evaluator cannot do,
///   is refused (the name of the construct is the error).
///
/// `in_step`: `expr` is a comprehension's step, whose own `+` (the
/// accumulation of `map` and `filter`) is charged per step, not by size.
fn instrument(expr: Expression, in_step: bool) -> Result<Expression, &'static str> {
    let id = expr.id;
    let out = match expr.expr {
        Expr::Unspecified => return Err("an empty expression"),
        Expr::Struct(_) => return Err("message construction (`Type{field: value}`)"),
        e @ (Expr::Literal(_) | Expr::Ident(_)) => node(e),
        Expr::Select(s) => node(Expr::Select(SelectExpr {
            operand: Box::new(instrument(*s.operand, false)?),
            field: s.field,
            test: s.test,
        })),
        Expr::List(l) => node(Expr::List(ListExpr {
            elements: l
                .elements
                .into_iter()
                .map(|e| instrument(e, false))
                .collect::<Result<_, _>>()?,
            optional_indices: l.optional_indices,
        })),
        Expr::Map(m) => {
            let mut entries = Vec::with_capacity(m.entries.len());
            for mut entry in m.entries {
                entry.expr = match entry.expr {
                    EntryExpr::MapEntry(e) => EntryExpr::MapEntry(MapEntryExpr {
                        key: instrument(e.key, false)?,
                        value: instrument(e.value, false)?,
                        optional: e.optional,
                    }),
                    EntryExpr::StructField(_) => {
                        return Err("message construction (`Type{field: value}`)");
                    }
                };
                entries.push(entry);
            }
            node(Expr::Map(MapExpr { entries }))
        }
        Expr::Comprehension(c) => {
            let c = *c;
            let step = instrument(c.loop_step, true)?;
            node(Expr::Comprehension(Box::new(ComprehensionExpr {
                iter_range: instrument(c.iter_range, false)?,
                iter_var: c.iter_var,
                iter_var2: c.iter_var2,
                accu_var: c.accu_var,
                accu_init: instrument(c.accu_init, false)?,
                loop_cond: instrument(c.loop_cond, false)?,
                loop_step: call(STEP, vec![step]),
                result: instrument(c.result, false)?,
            })))
        }
        Expr::Call(c) => {
            let target = match c.target {
                Some(t) => Some(Box::new(instrument(*t, false)?)),
                None => None,
            };
            let args: Vec<Expression> = c
                .args
                .into_iter()
                .map(|a| instrument(a, false))
                .collect::<Result<_, _>>()?;
            let name = c.func_name;
            if (name == "_[_]" || name == "_[?_]") && args.len() == 2 && is_device_map(&args[0]) {
                let lookup = call(DOMAIN, args);
                if name == "_[?_]" {
                    call("optional.of", vec![lookup])
                } else {
                    lookup
                }
            } else if name == "_?._" && args.len() == 2 {
                call(OPT_SELECT, args)
            } else {
                let operator = name.starts_with('_')
                    || name.starts_with('!')
                    || name.starts_with('-')
                    || name.starts_with('@');
                let charged = !operator || (name == "_+_" && !in_step);
                let inner = node(Expr::Call(CallExpr {
                    func_name: name,
                    target,
                    args,
                }));
                if charged {
                    call(COST, vec![inner])
                } else {
                    inner
                }
            }
        }
    };
    Ok(Expression { id, ..out })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use trainyard_model::dra::{AttrValue, DeviceCapacity};

    use super::*;

    fn gpu() -> Device {
        Device {
            driver: "gpu.nvidia.com".into(),
            pool: "node-a".into(),
            name: "gpu-0".into(),
            attributes: BTreeMap::from([
                (
                    "gpu.nvidia.com/type".into(),
                    AttrValue::String("gpu".into()),
                ),
                (
                    "gpu.nvidia.com/productName".into(),
                    AttrValue::String("NVIDIA A100-SXM4-40GB".into()),
                ),
                ("gpu.nvidia.com/index".into(), AttrValue::Int(0)),
                (
                    "gpu.nvidia.com/driverVersion".into(),
                    AttrValue::Version("550.54.15".into()),
                ),
                ("other.example.com/fast".into(), AttrValue::Bool(true)),
            ]),
            capacity: BTreeMap::from([(
                "gpu.nvidia.com/memory".into(),
                DeviceCapacity {
                    value: 40 * 1024 * 1024 * 1024 * 1000,
                    policy: None,
                },
            )]),
            multi: false,
            ..Device::default_for_tests()
        }
    }

    trait ForTests {
        fn default_for_tests() -> Self;
    }
    impl ForTests for Device {
        fn default_for_tests() -> Self {
            Device {
                driver: "".into(),
                pool: "".into(),
                name: "".into(),
                attributes: BTreeMap::new(),
                capacity: BTreeMap::new(),
                consumes: Vec::new(),
                taints: Vec::new(),
                multi: false,
            }
        }
    }

    fn eval(src: &str) -> Result<bool, SelectorError> {
        Selector::compile(src)?.matches(&gpu())
    }

    #[test]
    fn the_device_variable() {
        assert_eq!(eval(r#"device.driver == "gpu.nvidia.com""#), Ok(true));
        assert_eq!(eval("device.allowMultipleAllocations"), Ok(false));
        assert_eq!(
            eval(r#"device.attributes["gpu.nvidia.com"].type == "gpu""#),
            Ok(true)
        );
        assert_eq!(
            eval(r#"device.attributes["gpu.nvidia.com"].index == 0"#),
            Ok(true)
        );
        assert_eq!(
            eval(r#"device.attributes["other.example.com"].fast"#),
            Ok(true)
        );
    }

    #[test]
    fn capacities_are_quantities() {
        assert_eq!(
            eval(r#"device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0"#),
            Ok(true)
        );
        assert_eq!(
            eval(r#"device.capacity["gpu.nvidia.com"].memory.isGreaterThan(quantity("40Gi"))"#),
            Ok(false)
        );
        assert_eq!(
            eval(r#"device.capacity["gpu.nvidia.com"].memory == quantity("40Gi")"#),
            Ok(true)
        );
        assert_eq!(
            eval(r#"device.capacity["gpu.nvidia.com"].memory.asInteger() == 42949672960"#),
            Ok(true)
        );
    }

    #[test]
    fn milli_capacities_are_exact() {
        let mut d = gpu();
        d.capacity.insert(
            "gpu.nvidia.com/cores".into(),
            DeviceCapacity {
                value: 1500,
                policy: None,
            },
        );
        let s = Selector::compile(r#"device.capacity["gpu.nvidia.com"].cores == quantity("1.5")"#)
            .unwrap();
        assert_eq!(s.matches(&d), Ok(true));
    }

    #[test]
    fn versions_are_semvers() {
        assert_eq!(
            eval(
                r#"device.attributes["gpu.nvidia.com"].driverVersion.isGreaterThan(semver("550.0.0"))"#
            ),
            Ok(true)
        );
        assert_eq!(
            eval(
                r#"device.attributes["gpu.nvidia.com"].driverVersion.compareTo(semver("550.54.15")) == 0"#
            ),
            Ok(true)
        );
        assert_eq!(
            eval(r#"device.attributes["gpu.nvidia.com"].driverVersion == semver("550.54.15")"#),
            Ok(true)
        );
    }

    #[test]
    fn unknown_domains_are_empty_and_missing_names_are_errors() {
        assert_eq!(
            eval(r#"device.attributes["unknown.example.com"].size() == 0"#),
            Ok(true)
        );
        assert_eq!(
            eval(r#"has(device.attributes["unknown.example.com"].x)"#),
            Ok(false)
        );
        assert_eq!(
            eval(r#""unknown.example.com" in device.attributes"#),
            Ok(false)
        );
        assert_eq!(
            eval(r#"has(device.attributes["gpu.nvidia.com"].type)"#),
            Ok(true)
        );
        let err = eval(r#"device.attributes["gpu.nvidia.com"].nope == 1"#).unwrap_err();
        assert!(err.to_string().contains("no such key: nope"), "{err}");
        assert!(err.to_string().contains("device.attributes"), "{err}");
        let err = eval(r#"device.capacity["unknown.example.com"].memory.isInteger()"#).unwrap_err();
        assert!(matches!(err, SelectorError::Evaluation { .. }), "{err}");
        assert_eq!(
            eval(r#"device.attributes[?"gpu.nvidia.com"].?type.orValue("") == "gpu""#),
            Ok(true)
        );
        assert_eq!(
            eval(r#"device.attributes["gpu.nvidia.com"].?nope.orValue("x") == "x""#),
            Ok(true)
        );
    }

    #[test]
    fn cel_bind() {
        assert_eq!(
            eval(
                r#"cel.bind(dra, device.attributes["gpu.nvidia.com"], dra.type == "gpu" && dra.index == 0)"#
            ),
            Ok(true)
        );
        assert_eq!(eval("cel.bind(x, 2, cel.bind(y, x * 3, y == 6))"), Ok(true));
        assert!(eval("cel.bind(1, 2, true)").is_err());
    }

    #[test]
    fn the_result_must_be_a_bool() {
        let err = eval(r#"device.attributes["gpu.nvidia.com"].index"#).unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"selector `device.attributes["gpu.nvidia.com"].index`: the result is a int, not a bool"#
        );
    }

    #[test]
    fn syntax_errors_and_unsupported_constructs() {
        let err = Selector::compile("device.driver ==").unwrap_err();
        assert!(matches!(err, SelectorError::Syntax { .. }), "{err}");
        assert!(
            err.to_string()
                .starts_with("selector `device.driver ==`: syntax error"),
            "{err}"
        );
        let err = Selector::compile("Foo{a: 1} == 1").unwrap_err();
        assert!(matches!(err, SelectorError::Unsupported { .. }), "{err}");
    }

    #[test]
    fn long_expressions_are_refused() {
        let long = format!("{} true", "true &&".repeat(1500));
        let err = Selector::compile(&long).unwrap_err();
        assert!(matches!(err, SelectorError::TooLong { .. }), "{err}");
        assert!(err.to_string().len() < 400, "{err}");
    }

    #[test]
    fn the_budget_stops_runaway_evaluation() {
        // Statically cheap (unknown sizes count 32), dynamically 4M steps.
        let s = Selector::compile("lists.range(2000).all(x, lists.range(2000).all(y, x + y >= 0))")
            .unwrap();
        let err = s.matches(&gpu()).unwrap_err();
        assert!(matches!(err, SelectorError::CostLimit { .. }), "{err}");
        // An absorbing `||` does not hide it.
        let s = Selector::compile("true || lists.range(2000000).size() > 0").unwrap();
        assert_eq!(s.matches(&gpu()), Ok(true));
        let s = Selector::compile("lists.range(2000000).size() > 0 || true").unwrap();
        assert!(matches!(
            s.matches(&gpu()),
            Err(SelectorError::CostLimit { .. })
        ));
        // Strings growing through bindings pay for their size.
        let grow = "cel.bind(a, 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx', \
            cel.bind(b, a + a + a + a + a + a + a + a, cel.bind(c, b + b + b + b + b + b + b + b, \
            cel.bind(d, c + c + c + c + c + c + c + c, cel.bind(e, d + d + d + d + d + d + d + d, \
            cel.bind(f, e + e + e + e + e + e + e + e, f.size() > 0))))))";
        let s = Selector::compile(grow).unwrap();
        assert!(matches!(
            s.matches(&gpu()),
            Err(SelectorError::CostLimit { .. })
        ));
    }

    #[test]
    fn nested_comprehensions_over_literals_are_refused_at_compile_time() {
        let list: Vec<String> = (0..100).map(|i| i.to_string()).collect();
        let l = format!("[{}]", list.join(","));
        let src = format!("{l}.all(x, {l}.all(y, {l}.all(z, x + y + z >= 0)))");
        let err = Selector::compile(&src).unwrap_err();
        assert!(matches!(err, SelectorError::TooComplex { .. }), "{err}");
    }

    #[test]
    fn error_messages_are_readable() {
        let err = eval(r#"device.attributes["gpu.nvidia.com"].index + "a" == 1"#).unwrap_err();
        let text = err.to_string();
        assert!(!text.contains("Int("), "{text}");
        assert!(!text.contains("String("), "{text}");
    }
}
