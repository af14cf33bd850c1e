//! Rules between pods, as kube-scheduler's InterPodAffinity,
//! PodTopologySpread and NodePorts plugins apply them: the counts they
//! read and the checks and raw scores over those counts. The plugins that
//! use them are in [`crate::plugins`] (`PodPredicate`, `PodScorer`).
//!
//! Every pod of a cycle with any rule is a *member*: its namespace, labels
//! and own rules. A node's members are part of its [`NodeState`], so they
//! follow takes, gives and rollbacks (the ledger's undo log). A cycle in
//! which no pod has a rule builds no index and no member lists, and pays
//! nothing.
//!
//! For the pod being placed, [`PodCheck::new`] counts, over every node's
//! members, the pods each of its terms selects per topology domain, the
//! domains closed to it by placed pods' required anti-affinity
//! (symmetry), and the matching pods per spread domain; each candidate
//! node is then checked and scored against these counts.
//!
//! [`NodeState`]: crate::state::NodeState

use std::collections::{BTreeMap, HashMap};

use trainyard_model::{
    InclusionPolicy, LabelSelector, Node, PlacementConstraints, PodAffinityTerm, PodRules,
    SpreadConstraint, WhenUnsatisfiable,
};

/// Member ids a selector may match.
enum Candidates<'a> {
    Some(std::slice::Iter<'a, u32>),
    All(std::ops::Range<u32>),
}

impl Iterator for Candidates<'_> {
    type Item = u32;
    fn next(&mut self) -> Option<u32> {
        match self {
            Candidates::Some(it) => it.next().copied(),
            Candidates::All(r) => r.next(),
        }
    }
}

use crate::state::ClusterState;

/// The node label naming a node; a node without it is its own domain
/// under this key (every Kubernetes node has it, hand-written ones may
/// not).
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

/// A pod the rules see: its namespace, labels and own rules.
#[derive(Clone, Copy, Debug)]
pub struct Member<'s> {
    pub namespace: &'s str,
    pub labels: &'s BTreeMap<String, String>,
    pub rules: &'s PodRules,
}

/// The domains of one topology key: each node's domain (dense ids in
/// order of value), `None` when the node lacks the label.
#[derive(Debug)]
struct Domains {
    of_node: Vec<Option<u32>>,
    len: usize,
}

/// The cycle's members and the domains of every topology key a rule
/// names. Read-only once built.
#[derive(Debug)]
pub struct RuleIndex<'s> {
    members: Vec<Member<'s>>,
    domains: BTreeMap<&'s str, Domains>,
    /// Members whose terms bind or weigh other pods (symmetry).
    binding: Vec<u32>,
    /// Members by each of their labels (a cache for selectors; the order
    /// of its iteration never matters).
    by_label: HashMap<&'s str, HashMap<&'s str, Vec<u32>>>,
    /// Per member: its placement must be checked (own rules, or another
    /// member's term selects it).
    affected: Vec<bool>,
}

fn terms(r: &PodRules) -> impl Iterator<Item = &PodAffinityTerm> {
    r.affinity
        .iter()
        .chain(&r.anti_affinity)
        .chain(r.preferred_affinity.iter().map(|w| &w.term))
        .chain(r.preferred_anti_affinity.iter().map(|w| &w.term))
}

impl<'s> RuleIndex<'s> {
    /// `None` when no member has a rule: the cycle checks nothing.
    pub fn new(nodes: &[&'s Node], members: Vec<Member<'s>>) -> Option<RuleIndex<'s>> {
        if members.iter().all(|m| m.rules.is_empty()) {
            return None;
        }
        let mut keys: Vec<&'s str> = Vec::new();
        for m in &members {
            keys.extend(terms(m.rules).map(|t| t.topology_key.as_str()));
            keys.extend(m.rules.spread.iter().map(|c| c.topology_key.as_str()));
        }
        keys.sort_unstable();
        keys.dedup();
        let mut domains = BTreeMap::new();
        for key in keys {
            let value = |n: &'s Node| -> Option<&'s str> {
                match n.labels.get(key) {
                    Some(v) => Some(v.as_str()),
                    None if key == HOSTNAME_LABEL => Some(n.name.as_str()),
                    None => None,
                }
            };
            let mut ids: BTreeMap<&str, u32> = BTreeMap::new();
            for n in nodes {
                if let Some(v) = value(n) {
                    ids.insert(v, 0);
                }
            }
            for (i, id) in ids.values_mut().enumerate() {
                *id = i as u32;
            }
            let of_node = nodes
                .iter()
                .map(|n| value(n).and_then(|v| ids.get(v).copied()))
                .collect();
            domains.insert(
                key,
                Domains {
                    of_node,
                    len: ids.len(),
                },
            );
        }
        let binding: Vec<u32> = (0..members.len() as u32)
            .filter(|&m| terms(members[m as usize].rules).next().is_some())
            .collect();
        let mut by_label: HashMap<&'s str, HashMap<&'s str, Vec<u32>>> = HashMap::new();
        for (i, m) in members.iter().enumerate() {
            for (k, v) in m.labels {
                by_label
                    .entry(k.as_str())
                    .or_default()
                    .entry(v.as_str())
                    .or_default()
                    .push(i as u32);
            }
        }
        let mut ix = RuleIndex {
            members,
            domains,
            binding,
            by_label,
            affected: Vec::new(),
        };
        // Affected: own rules, or selected by another member's term.
        let mut affected: Vec<bool> = ix.members.iter().map(|m| !m.rules.is_empty()).collect();
        for &h in &ix.binding {
            for t in terms(ix.members[h as usize].rules) {
                for m in ix.candidates(t.selector.as_ref()) {
                    let q = &ix.members[m as usize];
                    if m != h && !affected[m as usize] && t.selects(q.namespace, q.labels) {
                        affected[m as usize] = true;
                    }
                }
            }
        }
        ix.affected = affected;
        Some(ix)
    }

    /// The members a selector may match: those carrying its first
    /// `matchLabels` pair, or every member.
    fn candidates(&self, sel: Option<&LabelSelector>) -> Candidates<'_> {
        match sel.and_then(|s| s.match_labels.iter().next()) {
            Some((k, v)) => Candidates::Some(
                self.by_label
                    .get(k.as_str())
                    .and_then(|vals| vals.get(v.as_str()))
                    .map_or(&[][..], |v| v.as_slice())
                    .iter(),
            ),
            None if sel.is_none() => Candidates::Some([].iter()),
            None => Candidates::All(0..self.members.len() as u32),
        }
    }

    /// Whether member `m`'s placement must be checked against the rules.
    pub fn affected(&self, m: u32) -> bool {
        self.affected.get(m as usize).copied().unwrap_or(false)
    }

    pub fn member(&self, m: u32) -> Option<Member<'s>> {
        self.members.get(m as usize).copied()
    }

    /// Node `n`'s domain under `key`.
    fn domain(&self, key: &str, n: usize) -> Option<u32> {
        self.domains.get(key).and_then(|d| d.of_node[n])
    }

    fn domain_count(&self, key: &str) -> usize {
        self.domains.get(key).map_or(0, |d| d.len)
    }
}

/// One spread constraint's counts for the pod being placed.
#[derive(Debug)]
struct Spread<'s> {
    c: &'s SpreadConstraint,
    /// Matching pods per domain, over eligible nodes.
    counts: Vec<u32>,
    /// The global minimum over eligible domains (0 below `minDomains`).
    min: u32,
    /// 1 when the constraint's selector matches the pod itself.
    self_match: u32,
}

/// One pod's view of where the pods are now: the counts its rules read.
#[derive(Debug)]
pub struct PodCheck<'r, 's> {
    ix: &'r RuleIndex<'s>,
    pod: Member<'s>,
    /// Per required affinity term: selected pods per domain.
    affinity: Vec<Vec<u32>>,
    /// Kubernetes' first-pod case: no pod anywhere matches the terms and
    /// the pod matches them itself, so any node will do.
    affinity_waived: bool,
    anti: Vec<Vec<u32>>,
    /// (key, domain) closed by a placed pod's required anti-affinity.
    closed: Vec<(&'s str, u32)>,
    /// (key, domain, weight) of preferred terms: the pod's own, per
    /// selected pod, and placed pods' terms that select the pod.
    weighted: Vec<(&'s str, u32, i64)>,
    spread: Vec<Spread<'s>>,
    /// Node `n` has every key of the pod's DoNotSchedule (resp.
    /// ScheduleAnyway) constraints.
    hard_keys: Vec<&'s str>,
    soft_keys: Vec<&'s str>,
}

impl<'r, 's> PodCheck<'r, 's> {
    /// Counts, for `pod` with node constraints `c`, over the members of
    /// every node in `state`.
    pub fn new(
        ix: &'r RuleIndex<'s>,
        pod: Member<'s>,
        c: &PlacementConstraints,
        nodes: &[&Node],
        state: &ClusterState,
    ) -> PodCheck<'r, 's> {
        let r = pod.rules;
        // Where each member is now (u32::MAX: not placed).
        let mut node_of = vec![u32::MAX; ix.members.len()];
        for (n, st) in state.nodes().iter().enumerate() {
            for &m in &st.members {
                if let Some(x) = node_of.get_mut(m as usize) {
                    *x = n as u32;
                }
            }
        }
        let placed = |m: u32| -> Option<(usize, Member<'s>)> {
            let n = *node_of.get(m as usize)?;
            (n != u32::MAX).then(|| (n as usize, ix.members[m as usize]))
        };
        // Per term: selected placed pods per domain of its key.
        let count = |t: &PodAffinityTerm| -> (Vec<u32>, bool) {
            let mut counts = vec![0u32; ix.domain_count(&t.topology_key)];
            let mut any = false;
            for m in ix.candidates(t.selector.as_ref()) {
                if let Some((n, q)) = placed(m)
                    && let Some(d) = ix.domain(&t.topology_key, n)
                    && t.selects(q.namespace, q.labels)
                {
                    counts[d as usize] += 1;
                    any = true;
                }
            }
            (counts, any)
        };
        let mut affinity_any = false;
        let affinity: Vec<Vec<u32>> = r
            .affinity
            .iter()
            .map(|t| {
                let (c, any) = count(t);
                affinity_any |= any;
                c
            })
            .collect();
        let anti: Vec<Vec<u32>> = r.anti_affinity.iter().map(|t| count(t).0).collect();
        let mut weighted = Vec::new();
        for (w, sign) in r
            .preferred_affinity
            .iter()
            .map(|w| (w, 1))
            .chain(r.preferred_anti_affinity.iter().map(|w| (w, -1)))
        {
            let (counts, _) = count(&w.term);
            for (d, k) in counts.iter().enumerate() {
                if *k > 0 {
                    weighted.push((
                        w.term.topology_key.as_str(),
                        d as u32,
                        sign * w.weight as i64 * i64::from(*k),
                    ));
                }
            }
        }
        // Symmetry: placed pods' terms that select this pod.
        let mut closed = Vec::new();
        for &h in &ix.binding {
            let Some((n, q)) = placed(h) else { continue };
            let hr = q.rules;
            for t in &hr.anti_affinity {
                if let Some(d) = ix.domain(&t.topology_key, n)
                    && t.selects(pod.namespace, pod.labels)
                {
                    closed.push((t.topology_key.as_str(), d));
                }
            }
            // kube-scheduler weighs a placed pod's required affinity with
            // hardPodAffinityWeight (1), its preferred terms with their
            // weights.
            for (t, w) in hr
                .affinity
                .iter()
                .map(|t| (t, 1))
                .chain(
                    hr.preferred_affinity
                        .iter()
                        .map(|w| (&w.term, w.weight as i64)),
                )
                .chain(
                    hr.preferred_anti_affinity
                        .iter()
                        .map(|w| (&w.term, -(w.weight as i64))),
                )
            {
                if let Some(d) = ix.domain(&t.topology_key, n)
                    && t.selects(pod.namespace, pod.labels)
                {
                    weighted.push((t.topology_key.as_str(), d, w));
                }
            }
        }
        // Spread: matching pods of the pod's namespace per domain, over
        // the nodes eligible for each constraint.
        let keys_of = |w: WhenUnsatisfiable| -> Vec<&'s str> {
            let mut k: Vec<&'s str> = r
                .spread
                .iter()
                .filter(|s| s.when_unsatisfiable == w)
                .map(|s| s.topology_key.as_str())
                .collect();
            k.sort_unstable();
            k.dedup();
            k
        };
        let hard_keys = keys_of(WhenUnsatisfiable::DoNotSchedule);
        let soft_keys = keys_of(WhenUnsatisfiable::ScheduleAnyway);
        let mut spread = Vec::with_capacity(r.spread.len());
        for sc in &r.spread {
            let keys = match sc.when_unsatisfiable {
                WhenUnsatisfiable::DoNotSchedule => &hard_keys,
                WhenUnsatisfiable::ScheduleAnyway => &soft_keys,
            };
            let eligible: Vec<bool> = nodes
                .iter()
                .enumerate()
                .map(|(n, node)| {
                    keys.iter().all(|k| ix.domain(k, n).is_some())
                        && (sc.node_affinity_policy == InclusionPolicy::Ignore
                            || (c.selector_matches(node) && c.affinity_matches(node)))
                        && (sc.node_taints_policy == InclusionPolicy::Ignore
                            || c.untolerated_taint(node).is_none())
                })
                .collect();
            let len = ix.domain_count(&sc.topology_key);
            let mut seen = vec![false; len];
            for (n, e) in eligible.iter().enumerate() {
                if *e && let Some(d) = ix.domain(&sc.topology_key, n) {
                    seen[d as usize] = true;
                }
            }
            let mut counts = vec![0u32; len];
            for m in ix.candidates(sc.selector.as_ref()) {
                if let Some((n, q)) = placed(m)
                    && eligible[n]
                    && q.namespace == pod.namespace
                    && let Some(d) = ix.domain(&sc.topology_key, n)
                    && sc.selector.as_ref().is_some_and(|x| x.matches(q.labels))
                {
                    counts[d as usize] += 1;
                }
            }
            let domains = seen.iter().filter(|x| **x).count();
            let min = (0..len)
                .filter(|&d| seen[d])
                .map(|d| counts[d])
                .min()
                .unwrap_or(0);
            spread.push(Spread {
                c: sc,
                min: if sc.min_domains.is_some_and(|m| (domains as u32) < m) {
                    0
                } else {
                    min
                },
                counts,
                self_match: u32::from(sc.selector.as_ref().is_some_and(|x| x.matches(pod.labels))),
            });
        }
        let affinity_waived = !r.affinity.is_empty()
            && !affinity_any
            && r.affinity
                .iter()
                .all(|t| t.selects(pod.namespace, pod.labels));
        PodCheck {
            ix,
            pod,
            affinity,
            affinity_waived,
            anti,
            closed,
            weighted,
            spread,
            hard_keys,
            soft_keys,
        }
    }

    /// NodePorts: no pod on node `n` opens a host port that conflicts
    /// with one of the pod's.
    pub fn ports_free(&self, state: &ClusterState, n: usize) -> bool {
        let mine = &self.pod.rules.host_ports;
        if mine.is_empty() {
            return true;
        }
        state.nodes()[n].members.iter().all(|&m| {
            self.ix.member(m).is_none_or(|q| {
                q.rules
                    .host_ports
                    .iter()
                    .all(|p| !mine.iter().any(|x| x.conflicts(p)))
            })
        })
    }

    /// Required affinity: every term finds a selected pod in node `n`'s
    /// domain (or the first-pod case applies).
    pub fn affinity_ok(&self, n: usize) -> bool {
        self.affinity_waived
            || self
                .pod
                .rules
                .affinity
                .iter()
                .zip(&self.affinity)
                .all(|(t, counts)| {
                    self.ix
                        .domain(&t.topology_key, n)
                        .is_some_and(|d| counts[d as usize] > 0)
                })
    }

    /// Required anti-affinity: no term finds a selected pod in node `n`'s
    /// domain (a node without the key cannot break it).
    pub fn anti_affinity_ok(&self, n: usize) -> bool {
        self.pod
            .rules
            .anti_affinity
            .iter()
            .zip(&self.anti)
            .all(|(t, counts)| {
                self.ix
                    .domain(&t.topology_key, n)
                    .is_none_or(|d| counts[d as usize] == 0)
            })
    }

    /// Symmetry: no placed pod's required anti-affinity closes node `n`'s
    /// domain to this pod.
    pub fn not_closed(&self, n: usize) -> bool {
        self.closed
            .iter()
            .all(|(key, d)| self.ix.domain(key, n) != Some(*d))
    }

    /// DoNotSchedule spread: node `n` has every key, and placing the pod
    /// there keeps each skew within `maxSkew`.
    pub fn spread_ok(&self, n: usize) -> bool {
        if self
            .hard_keys
            .iter()
            .any(|k| self.ix.domain(k, n).is_none())
        {
            return false;
        }
        self.spread
            .iter()
            .filter(|s| s.c.when_unsatisfiable == WhenUnsatisfiable::DoNotSchedule)
            .all(|s| {
                let Some(d) = self.ix.domain(&s.c.topology_key, n) else {
                    return false;
                };
                let count = s.counts[d as usize] + s.self_match;
                count.saturating_sub(s.min) <= s.c.max_skew
            })
    }

    /// Whether the pod has anything for the inter-pod affinity score.
    pub fn has_affinity_score(&self) -> bool {
        !self.weighted.is_empty()
    }

    /// Raw inter-pod affinity score of node `n`: Σ weight over the
    /// (key, domain) entries that are `n`'s.
    pub fn affinity_raw(&self, n: usize) -> i64 {
        self.weighted
            .iter()
            .filter(|(key, d, _)| self.ix.domain(key, n) == Some(*d))
            .map(|(_, _, w)| w)
            .sum()
    }

    /// Whether the pod has ScheduleAnyway constraints.
    pub fn spread_raw_applies(&self) -> bool {
        !self.soft_keys.is_empty()
    }

    /// Raw spread score of node `n` (lower is better), `None` when `n`
    /// lacks a key of the ScheduleAnyway constraints or the pod has none.
    pub fn spread_raw(&self, n: usize) -> Option<i64> {
        if self.soft_keys.is_empty()
            || self
                .soft_keys
                .iter()
                .any(|k| self.ix.domain(k, n).is_none())
        {
            return None;
        }
        let mut s = 0i64;
        for sp in &self.spread {
            if sp.c.when_unsatisfiable != WhenUnsatisfiable::ScheduleAnyway {
                continue;
            }
            let d = self.ix.domain(&sp.c.topology_key, n)?;
            s += i64::from(sp.counts[d as usize]) + i64::from(sp.c.max_skew) - 1;
        }
        Some(s)
    }
}

#[cfg(test)]
#[path = "podrules_tests.rs"]
mod tests;
