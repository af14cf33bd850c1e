//! The queue tree.
//!
//! Queues form a tree of any depth under an implicit root that stands for
//! the whole cluster. Only leaves hold jobs. A tree is built with
//! [`QueueTree::build`], which checks every structural rule and reports all
//! problems at once, each naming the queues involved.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::resources::{Limits, ResourceName, Resources};

/// What a user declares about one queue.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueSpec {
    pub name: String,
    /// Parent queue; `None` for a top-level queue.
    pub parent: Option<String>,
    /// Deserved share, guaranteed while the queue has that much demand.
    pub quota: Resources,
    /// Hard caps; resources without an entry are unlimited.
    pub limit: Limits,
    /// Weight of this queue when sharing what is left above quotas.
    pub over_quota_weight: u32,
    /// Siblings with higher priority get the over-quota remainder first.
    pub priority: i32,
    /// A job of this queue must have run this long before it may be
    /// preempted or reclaimed. `None`: inherit from the parent (none at the
    /// top: no protection).
    #[serde(default)]
    pub min_runtime_seconds: Option<u64>,
    /// A pending job of this queue evicts nobody until it has waited this
    /// long (a job's own delay comes first). `None`: inherit from the
    /// parent (none at the top: the core's default).
    #[serde(default)]
    pub preemption_delay_seconds: Option<u64>,
    /// The walltime of a job of this queue that declares none (as Slurm's
    /// partition `DefaultTime`). `None`: inherit from the parent (none at
    /// the top: the nearest maximum, else the job has no walltime).
    #[serde(default)]
    pub default_walltime_seconds: Option<u64>,
    /// The longest walltime a job of this queue may declare (as Slurm's
    /// partition `MaxTime`); a job that declares more stays pending and
    /// says why. `None`: inherit from the parent (none at the top: no
    /// maximum).
    #[serde(default)]
    pub max_walltime_seconds: Option<u64>,
}

impl QueueSpec {
    /// A top-level queue with no quota, no limit, weight 1, priority 0.
    pub fn new(name: impl Into<String>) -> Self {
        QueueSpec {
            name: name.into(),
            parent: None,
            quota: Resources::zero(),
            limit: Limits::unlimited(),
            over_quota_weight: 1,
            priority: 0,
            min_runtime_seconds: None,
            preemption_delay_seconds: None,
            default_walltime_seconds: None,
            max_walltime_seconds: None,
        }
    }
    pub fn min_runtime(mut self, seconds: u64) -> Self {
        self.min_runtime_seconds = Some(seconds);
        self
    }
    pub fn parent(mut self, parent: impl Into<String>) -> Self {
        self.parent = Some(parent.into());
        self
    }
    pub fn quota(mut self, quota: Resources) -> Self {
        self.quota = quota;
        self
    }
    pub fn limit(mut self, limit: Limits) -> Self {
        self.limit = limit;
        self
    }
    pub fn weight(mut self, w: u32) -> Self {
        self.over_quota_weight = w;
        self
    }
    pub fn priority(mut self, p: i32) -> Self {
        self.priority = p;
        self
    }
}

/// Index of a queue in a [`QueueTree`]. `QueueTree::ROOT` is the implicit root.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct QueueId(pub usize);

/// A structural problem in a set of queues.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QueueError {
    #[error("queue {name:?} is defined more than once")]
    Duplicate { name: String },
    #[error("queue {queue:?}: parent {parent:?} does not exist")]
    UnknownParent { queue: String, parent: String },
    #[error("queues {} form a cycle through their parents", .queues.join(" -> "))]
    Cycle { queues: Vec<String> },
    #[error(
        "children of queue {parent:?} ({}) have quotas summing to {} {resource}, above the parent's quota of {}",
        .children.join(", "),
        .resource.format_amount(*.children_sum),
        .resource.format_amount(*.parent_quota)
    )]
    QuotaAboveParent {
        parent: String,
        children: Vec<String>,
        resource: ResourceName,
        children_sum: u64,
        parent_quota: u64,
    },
    #[error("queue {queue:?}: quota {} {resource} is above its own limit {}", .resource.format_amount(*.quota), .resource.format_amount(*.limit))]
    QuotaAboveLimit {
        queue: String,
        resource: ResourceName,
        quota: u64,
        limit: u64,
    },
    #[error("queue name must not be empty")]
    EmptyName,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct QueueNode {
    spec: QueueSpec,
    parent: Option<QueueId>,
    /// Sorted by name.
    children: Vec<QueueId>,
    /// `a/b/c` from the top-level queue down.
    path: String,
}

/// A validated queue tree. Ids are dense; `ROOT` is the implicit root whose
/// children are the top-level queues. Children are ordered by name, so the
/// tree does not depend on the order queues were given in.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Vec<QueueSpec>", into = "Vec<QueueSpec>")]
pub struct QueueTree {
    nodes: Vec<QueueNode>,
    by_name: BTreeMap<String, QueueId>,
}

impl Default for QueueTree {
    fn default() -> Self {
        // An empty tree is always valid: only the root exists.
        QueueTree::build(Vec::new()).unwrap_or_else(|_| unreachable!("empty tree is valid"))
    }
}

impl TryFrom<Vec<QueueSpec>> for QueueTree {
    type Error = QueueTreeErrors;
    fn try_from(specs: Vec<QueueSpec>) -> Result<Self, Self::Error> {
        QueueTree::build(specs).map_err(QueueTreeErrors)
    }
}

impl From<QueueTree> for Vec<QueueSpec> {
    fn from(t: QueueTree) -> Self {
        t.nodes.into_iter().skip(1).map(|n| n.spec).collect()
    }
}

/// All problems found while building a tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueTreeErrors(pub Vec<QueueError>);

impl fmt::Display for QueueTreeErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let msgs: Vec<String> = self.0.iter().map(|e| e.to_string()).collect();
        f.write_str(&msgs.join("; "))
    }
}

impl std::error::Error for QueueTreeErrors {}

impl QueueTree {
    pub const ROOT: QueueId = QueueId(0);

    /// Builds and validates a tree. Returns every problem found.
    pub fn build(specs: Vec<QueueSpec>) -> Result<QueueTree, Vec<QueueError>> {
        let mut errors = Vec::new();
        let mut specs_by_name: BTreeMap<String, QueueSpec> = BTreeMap::new();
        for spec in specs {
            if spec.name.is_empty() {
                errors.push(QueueError::EmptyName);
                continue;
            }
            if specs_by_name.contains_key(&spec.name) {
                errors.push(QueueError::Duplicate { name: spec.name });
                continue;
            }
            specs_by_name.insert(spec.name.clone(), spec);
        }
        for spec in specs_by_name.values() {
            if let Some(p) = &spec.parent
                && !specs_by_name.contains_key(p)
            {
                errors.push(QueueError::UnknownParent {
                    queue: spec.name.clone(),
                    parent: p.clone(),
                });
            }
            for (res, limit) in spec.limit.iter() {
                let q = spec.quota.get(res);
                if q > limit {
                    errors.push(QueueError::QuotaAboveLimit {
                        queue: spec.name.clone(),
                        resource: res.clone(),
                        quota: q,
                        limit,
                    });
                }
            }
        }
        // Cycles: follow parents from every queue, never walking a queue
        // twice (linear overall); report each cycle once, starting from
        // its smallest name.
        let mut done: BTreeSet<&str> = BTreeSet::new();
        for start in specs_by_name.keys() {
            let mut path: Vec<&str> = Vec::new();
            let mut on_path: BTreeMap<&str, usize> = BTreeMap::new();
            let mut cur = Some(start.as_str());
            while let Some(q) = cur {
                if done.contains(q) || !specs_by_name.contains_key(q) {
                    break;
                }
                if let Some(&pos) = on_path.get(q) {
                    let mut cycle: Vec<String> =
                        path[pos..].iter().map(|s| s.to_string()).collect();
                    // Rotate so the smallest name comes first, then close the loop.
                    if let Some(min) = cycle
                        .iter()
                        .enumerate()
                        .min_by(|a, b| a.1.cmp(b.1))
                        .map(|(i, _)| i)
                    {
                        cycle.rotate_left(min);
                    }
                    cycle.push(cycle[0].clone());
                    errors.push(QueueError::Cycle { queues: cycle });
                    break;
                }
                on_path.insert(q, path.len());
                path.push(q);
                cur = specs_by_name.get(q).and_then(|s| s.parent.as_deref());
            }
            done.extend(path);
        }
        if !errors.is_empty() {
            return Err(errors);
        }

        // Structure is a forest now: assign ids in name order.
        let mut nodes = vec![QueueNode {
            spec: QueueSpec::new("<root>"),
            parent: None,
            children: Vec::new(),
            path: String::new(),
        }];
        let mut by_name = BTreeMap::new();
        for (name, spec) in &specs_by_name {
            by_name.insert(name.clone(), QueueId(nodes.len()));
            nodes.push(QueueNode {
                spec: spec.clone(),
                parent: None,
                children: Vec::new(),
                path: String::new(),
            });
        }
        for i in 1..nodes.len() {
            let parent = match &nodes[i].spec.parent {
                // Parent existence was checked above.
                Some(p) => by_name[p],
                None => Self::ROOT,
            };
            nodes[i].parent = Some(parent);
            // Ids are assigned in name order, so pushing in id order keeps children sorted.
            nodes[parent.0].children.push(QueueId(i));
        }
        let mut tree = QueueTree { nodes, by_name };
        // Paths top-down: each is its parent's path plus its name.
        for q in tree.top_down().into_iter().skip(1) {
            let path = match tree.nodes[q.0].parent {
                Some(p) if p != Self::ROOT => {
                    format!("{}/{}", tree.nodes[p.0].path, tree.nodes[q.0].spec.name)
                }
                _ => tree.nodes[q.0].spec.name.clone(),
            };
            tree.nodes[q.0].path = path;
        }

        // Children's quotas must fit in a (non-root) parent's quota.
        for i in 1..tree.nodes.len() {
            let node = &tree.nodes[i];
            if node.children.is_empty() {
                continue;
            }
            let mut sum = Resources::zero();
            for c in &node.children {
                sum.add(&tree.nodes[c.0].spec.quota);
            }
            for (res, s) in sum.iter() {
                let pq = node.spec.quota.get(&res);
                if s > pq {
                    errors.push(QueueError::QuotaAboveParent {
                        parent: node.spec.name.clone(),
                        children: node
                            .children
                            .iter()
                            .filter(|c| tree.nodes[c.0].spec.quota.get(&res) > 0)
                            .map(|c| tree.nodes[c.0].spec.name.clone())
                            .collect(),
                        resource: res,
                        children_sum: s,
                        parent_quota: pq,
                    });
                }
            }
        }
        if errors.is_empty() {
            Ok(tree)
        } else {
            Err(errors)
        }
    }

    /// Number of ids, including the root.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }
    /// True when there are no user queues.
    pub fn is_empty(&self) -> bool {
        self.nodes.len() == 1
    }
    pub fn get(&self, name: &str) -> Option<QueueId> {
        self.by_name.get(name).copied()
    }
    pub fn spec(&self, id: QueueId) -> &QueueSpec {
        &self.nodes[id.0].spec
    }
    pub fn name(&self, id: QueueId) -> &str {
        &self.nodes[id.0].spec.name
    }
    /// `org/team/sub`, from the top-level queue down; empty for the root.
    pub fn path(&self, id: QueueId) -> &str {
        &self.nodes[id.0].path
    }
    pub fn parent(&self, id: QueueId) -> Option<QueueId> {
        self.nodes[id.0].parent
    }
    pub fn children(&self, id: QueueId) -> &[QueueId] {
        &self.nodes[id.0].children
    }
    pub fn is_leaf(&self, id: QueueId) -> bool {
        id != Self::ROOT && self.nodes[id.0].children.is_empty()
    }
    /// `id` and its ancestors up to (excluding) the root, bottom-up.
    pub fn ancestors(&self, id: QueueId) -> impl Iterator<Item = QueueId> + '_ {
        std::iter::successors(Some(id), move |q| self.nodes[q.0].parent)
            .take_while(|q| *q != Self::ROOT)
    }
    /// The walltime of a job of queue `queue` (seconds): `declared`, else
    /// the nearest `default_walltime_seconds` on its path, else the
    /// nearest `max_walltime_seconds` (as Slurm uses a partition's
    /// `MaxTime` where it sets no `DefaultTime`); `None`: no limit (also
    /// for a queue the tree does not have).
    pub fn walltime(&self, queue: &str, declared: Option<u64>) -> Option<u64> {
        self.walltime_in(
            declared.is_none().then(|| self.get(queue)).flatten(),
            declared,
        )
    }
    /// [`QueueTree::walltime`] for a queue already looked up (`None`: one
    /// the tree does not have).
    pub fn walltime_in(&self, queue: Option<QueueId>, declared: Option<u64>) -> Option<u64> {
        declared.or_else(|| {
            let queue = queue?;
            self.ancestors(queue)
                .find_map(|a| self.spec(a).default_walltime_seconds)
                .or_else(|| {
                    self.ancestors(queue)
                        .find_map(|a| self.spec(a).max_walltime_seconds)
                })
        })
    }
    /// All user queue ids, in name order.
    pub fn ids(&self) -> impl Iterator<Item = QueueId> + '_ {
        self.by_name.values().copied()
    }
    /// All ids in a top-down order (every parent before its children), root first.
    pub fn top_down(&self) -> Vec<QueueId> {
        let mut out = vec![Self::ROOT];
        let mut i = 0;
        while i < out.len() {
            out.extend_from_slice(&self.nodes[out[i].0].children);
            i += 1;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_in_name_order_with_paths() {
        let t = QueueTree::build(vec![
            QueueSpec::new("nlp").parent("research"),
            QueueSpec::new("research"),
            QueueSpec::new("cv").parent("research"),
        ])
        .unwrap();
        let r = t.get("research").unwrap();
        let names: Vec<_> = t.children(r).iter().map(|c| t.name(*c)).collect();
        assert_eq!(names, ["cv", "nlp"]);
        assert_eq!(t.path(t.get("nlp").unwrap()), "research/nlp");
        assert!(t.is_leaf(t.get("nlp").unwrap()));
        assert!(!t.is_leaf(r));
    }

    #[test]
    fn a_job_without_walltime_takes_the_nearest_default_else_the_nearest_maximum() {
        let with = |q: QueueSpec, default: Option<u64>, max: Option<u64>| QueueSpec {
            default_walltime_seconds: default,
            max_walltime_seconds: max,
            ..q
        };
        let t = QueueTree::build(vec![
            with(QueueSpec::new("org"), Some(3600), Some(86_400)),
            with(QueueSpec::new("capped").parent("org"), None, Some(7200)),
            QueueSpec::new("plain").parent("org"),
            with(QueueSpec::new("alone"), None, Some(600)),
            QueueSpec::new("free"),
        ])
        .unwrap();
        // Declared walltimes stand (the maximum check is the core's).
        assert_eq!(t.walltime("capped", Some(100_000)), Some(100_000));
        // A default anywhere on the path comes before a maximum.
        assert_eq!(t.walltime("capped", None), Some(3600));
        assert_eq!(t.walltime("plain", None), Some(3600));
        // No default on the path: the maximum (Slurm's MaxTime).
        assert_eq!(t.walltime("alone", None), Some(600));
        assert_eq!(t.walltime("free", None), None);
        assert_eq!(t.walltime("missing", None), None);
    }

    #[test]
    fn reports_every_problem_naming_queues() {
        let errs = QueueTree::build(vec![
            QueueSpec::new("a").parent("b"),
            QueueSpec::new("b").parent("a"),
            QueueSpec::new("c").parent("nope"),
            QueueSpec::new("c"),
        ])
        .unwrap_err();
        let text: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
        assert!(
            text.iter()
                .any(|t| t.contains("\"c\" is defined more than once")),
            "{text:?}"
        );
        assert!(text.iter().any(|t| t.contains("a -> b -> a")), "{text:?}");
        assert_eq!(errs.len(), 3, "{text:?}");
        let errs = QueueTree::build(vec![QueueSpec::new("x").parent("nope")]).unwrap_err();
        assert_eq!(
            errs[0].to_string(),
            "queue \"x\": parent \"nope\" does not exist"
        );
    }

    #[test]
    fn deep_chains_build_quickly_and_long_cycles_are_found_once() {
        // 3,000 levels: cubic cycle detection took minutes at this depth.
        let mut specs = vec![QueueSpec::new("q00000")];
        for i in 1..3_000 {
            specs.push(QueueSpec::new(format!("q{i:05}")).parent(format!("q{:05}", i - 1)));
        }
        let tree = QueueTree::build(specs.clone()).unwrap();
        assert!(
            tree.path(tree.get("q02999").unwrap())
                .starts_with("q00000/q00001/")
        );
        specs[0].parent = Some("q02999".into());
        let errs = QueueTree::build(specs).unwrap_err();
        assert_eq!(errs.len(), 1);
        let text = errs[0].to_string();
        assert!(
            text.starts_with("queues q00000 -> q02999 -> q02998 -> "),
            "{}",
            &text[..60]
        );
    }

    #[test]
    fn children_quota_above_parent_is_rejected() {
        let errs = QueueTree::build(vec![
            QueueSpec::new("org").quota(Resources::zero().with_gpus(8)),
            QueueSpec::new("a")
                .parent("org")
                .quota(Resources::zero().with_gpus(6)),
            QueueSpec::new("b")
                .parent("org")
                .quota(Resources::zero().with_gpus(4)),
        ])
        .unwrap_err();
        assert_eq!(
            errs[0].to_string(),
            "children of queue \"org\" (a, b) have quotas summing to 10 nvidia.com/gpu, above the parent's quota of 8"
        );
    }

    #[test]
    fn quota_above_own_limit_is_rejected() {
        let errs = QueueTree::build(vec![
            QueueSpec::new("a")
                .quota(Resources::zero().with_gpus(6))
                .limit(Limits::unlimited().cap(ResourceName::Gpu, 4000)),
        ])
        .unwrap_err();
        assert!(
            errs[0]
                .to_string()
                .contains("quota 6 nvidia.com/gpu is above its own limit 4")
        );
    }
}
