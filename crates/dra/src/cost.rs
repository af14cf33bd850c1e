//! The cost limit of a selector, twice:
//!
//! - **Statically**, at compile time, [`estimate`] walks the parsed
//!   expression: every node costs 1, and a comprehension (`all`,
//!   `exists`, `exists_one`, `map`, `filter`) costs its range, its start
//!   and its result plus, per element, its condition and step. A range's
//!   size is known for a list or map literal (its length, or the sum of
//!   two for `+`), and assumed [`UNKNOWN_SIZE`] otherwise: a device's
//!   maps (domains, names) hold at most 32 entries
//!   (`ResourceSliceMaxAttributesAndCapacitiesPerDevice`). An estimate
//!   above [`MAX_COST`](crate::MAX_COST) is refused
//!   ([`SelectorError::TooComplex`](crate::SelectorError::TooComplex)):
//!   e.g. three nested comprehensions over a 100-element list.
//! - **At run time**, evaluation on one device draws on a budget of
//!   [`MAX_COST`](crate::MAX_COST): each comprehension step costs 1; each
//!   function call and each `+` costs 1 plus the size of its result
//!   (characters of a string, elements of a list or map), so that growing
//!   strings or lists pays for itself; `lists.range(n)` is refused before
//!   it allocates when `n` exceeds what is left. Spending the budget
//!   fails the evaluation
//!   ([`SelectorError::CostLimit`](crate::SelectorError::CostLimit)), even
//!   if an `||` or `&&` would have absorbed the error.
//!
//! The units approximate, and are not identical to, Kubernetes' CEL cost
//! units: an expression Kubernetes accepts may, in a contrived case, be
//! refused here or the other way round; selectors of the kind drivers
//! document cost a few dozen.

use kube_cel::cel::common::ast::{EntryExpr, Expr};
use kube_cel::cel::parser::Expression;

/// The assumed number of elements of a list or map whose size is not
/// known statically.
pub const UNKNOWN_SIZE: u64 = 32;

struct Estimate {
    cost: u64,
    /// Elements, when known.
    size: Option<u64>,
}

/// The static cost estimate of a parsed expression (see the module).
pub fn estimate(expr: &Expression) -> u64 {
    walk(expr).cost
}

fn walk(expr: &Expression) -> Estimate {
    match &expr.expr {
        Expr::Unspecified | Expr::Literal(_) | Expr::Ident(_) => Estimate {
            cost: 1,
            size: None,
        },
        Expr::Select(select) => Estimate {
            cost: walk(&select.operand).cost.saturating_add(1),
            size: None,
        },
        Expr::Call(call) => {
            let parts: Vec<Estimate> = call
                .target
                .iter()
                .map(|t| walk(t))
                .chain(call.args.iter().map(walk))
                .collect();
            let cost = parts.iter().fold(1u64, |acc, p| acc.saturating_add(p.cost));
            let size = match (call.func_name.as_str(), parts.as_slice()) {
                ("_+_", [a, b]) => a.size.zip(b.size).map(|(a, b)| a.saturating_add(b)),
                _ => None,
            };
            Estimate { cost, size }
        }
        Expr::List(list) => Estimate {
            cost: list
                .elements
                .iter()
                .fold(1u64, |acc, e| acc.saturating_add(walk(e).cost)),
            size: Some(list.elements.len() as u64),
        },
        Expr::Map(map) => Estimate {
            cost: map.entries.iter().fold(1u64, |acc, e| {
                acc.saturating_add(match &e.expr {
                    EntryExpr::MapEntry(m) => walk(&m.key).cost.saturating_add(walk(&m.value).cost),
                    EntryExpr::StructField(f) => walk(&f.value).cost,
                })
            }),
            size: Some(map.entries.len() as u64),
        },
        Expr::Struct(s) => Estimate {
            cost: s.entries.len() as u64 + 1,
            size: None,
        },
        Expr::Comprehension(c) => {
            let range = walk(&c.iter_range);
            let n = range.size.unwrap_or(UNKNOWN_SIZE);
            let per_element = walk(&c.loop_cond)
                .cost
                .saturating_add(walk(&c.loop_step).cost);
            let cost = range
                .cost
                .saturating_add(walk(&c.accu_init).cost)
                .saturating_add(n.saturating_mul(per_element))
                .saturating_add(walk(&c.result).cost);
            // `map` and `filter` build a list of at most n elements.
            let size = matches!(c.accu_init.expr, Expr::List(_)).then_some(n);
            Estimate { cost, size }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube_cel::cel::parser::Parser;

    fn cost(src: &str) -> u64 {
        estimate(&Parser::default().parse(src).unwrap())
    }

    #[test]
    fn simple_selectors_are_cheap() {
        assert!(cost(r#"device.driver == "gpu.nvidia.com""#) < 10);
        let typical = r#"device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu' && device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0"#;
        assert!(cost(typical) < 50, "{}", cost(typical));
    }

    #[test]
    fn comprehensions_multiply_by_their_range() {
        let one = cost("[1, 2, 3].all(x, x > 0)");
        let nested = cost("[1, 2, 3].all(x, [1, 2, 3].all(y, x + y > 0))");
        assert!(nested > 3 * one - 10, "{one} {nested}");
        // Unknown ranges count as 32 elements.
        let unknown = cost("device.attributes['a'].all(k, true)");
        assert!(unknown >= 32, "{unknown}");
        let list: Vec<String> = (0..100).map(|i| i.to_string()).collect();
        let l = format!("[{}]", list.join(","));
        let three = format!("{l}.all(x, {l}.all(y, {l}.all(z, x + y + z > 0)))");
        assert!(cost(&three) > crate::MAX_COST);
    }
}
