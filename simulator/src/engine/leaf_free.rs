//! Wholly free GPUs per leaf domain, for the cluster samples.

use super::*;

/// Wholly free GPUs per leaf domain, kept up to date bind by bind.
pub(super) struct LeafFree {
    /// Input node index by name.
    node_index: HashMap<String, usize>,
    /// Tasks holding each device (by position in `Node::gpus`), per node.
    holders: Vec<Vec<u32>>,
    /// Devices with no holder, per node (up or not).
    free: Vec<u32>,
    /// Leaf domain of each node.
    leaf_of: Vec<Option<usize>>,
    /// Σ `free` over the domain's nodes that are up.
    leaf_free: Vec<u64>,
}

impl LeafFree {
    pub(super) fn new(nodes: &[Node], topo: &Topology) -> Option<LeafFree> {
        let level = &topo.levels()[topo.leaf_level()?];
        let leaf_of: Vec<Option<usize>> = nodes
            .iter()
            .map(|n| {
                let id = topo.node_id(&n.name)?;
                level
                    .of_node
                    .get(id as usize)
                    .copied()
                    .flatten()
                    .map(|d| d as usize)
            })
            .collect();
        let free: Vec<u32> = nodes.iter().map(|n| n.gpus.len() as u32).collect();
        let mut leaf_free = vec![0u64; level.domains.len()];
        for (n, d) in leaf_of.iter().enumerate() {
            if let Some(d) = d {
                leaf_free[*d] += free[n] as u64;
            }
        }
        Some(LeafFree {
            node_index: nodes
                .iter()
                .enumerate()
                .map(|(i, n)| (n.name.clone(), i))
                .collect(),
            holders: nodes.iter().map(|n| vec![0; n.gpus.len()]).collect(),
            free,
            leaf_of,
            leaf_free,
        })
    }

    /// A task on `node` takes (`take`) or gives back the devices `gpus`.
    pub(super) fn change(
        &mut self,
        nodes: &[Node],
        up: &[bool],
        node: &str,
        gpus: &[u32],
        take: bool,
    ) {
        let Some(&n) = self.node_index.get(node) else {
            return;
        };
        for g in gpus {
            let Some(pos) = nodes[n].gpus.iter().position(|d| d.index == *g) else {
                continue;
            };
            let h = &mut self.holders[n][pos];
            let was_free = *h == 0;
            if take {
                *h += 1;
            } else {
                *h = h.saturating_sub(1);
            }
            let now_free = *h == 0;
            if was_free == now_free {
                continue;
            }
            if now_free {
                self.free[n] += 1;
            } else {
                self.free[n] = self.free[n].saturating_sub(1);
            }
            if up[n]
                && let Some(d) = self.leaf_of[n]
            {
                if now_free {
                    self.leaf_free[d] += 1;
                } else {
                    self.leaf_free[d] = self.leaf_free[d].saturating_sub(1);
                }
            }
        }
    }

    /// Node `n` went down or came back.
    pub(super) fn node(&mut self, n: usize, up: bool) {
        if let Some(d) = self.leaf_of[n] {
            if up {
                self.leaf_free[d] += self.free[n] as u64;
            } else {
                self.leaf_free[d] = self.leaf_free[d].saturating_sub(self.free[n] as u64);
            }
        }
    }

    pub(super) fn largest(&self) -> u32 {
        self.leaf_free
            .iter()
            .copied()
            .max()
            .unwrap_or(0)
            .min(u32::MAX as u64) as u32
    }
}
