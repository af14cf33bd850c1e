//! The backtracking search that chooses a node's devices for the
//! requests of some claims: candidates least wanted first, constraints
//! kept as devices are chosen, a bounded number of steps.

use super::*;

/// One backtracking search over the requests of some claims.
pub(super) struct Search<'a> {
    st: &'a DraState,
    avail: Avail,
    specs: &'a [&'a ClaimSpec],
    /// Per claim: the picks so far.
    picks: Vec<Vec<Pick>>,
    steps: u32,
    /// The deepest request that failed (for the reason).
    miss: Option<Miss>,
    /// Devices to try first (the pod's GPU slots).
    prefer: &'a [u32],
}

impl<'a> Search<'a> {
    pub(super) fn new(st: &'a DraState, specs: &'a [&'a ClaimSpec], prefer: &'a [u32]) -> Self {
        Search {
            st,
            avail: st.avail.clone(),
            specs,
            picks: vec![Vec::new(); specs.len()],
            steps: 0,
            miss: None,
            prefer,
        }
    }

    pub(super) fn run(&mut self) -> Result<Vec<Vec<Pick>>, Miss> {
        if self.st.node.devices.devices.is_empty() {
            return Err(Miss::NoDevices);
        }
        if self.request(0, 0) {
            Ok(std::mem::take(&mut self.picks))
        } else if self.steps >= SEARCH_STEPS {
            Err(Miss::TooManySteps)
        } else {
            Err(self.miss.clone().unwrap_or(Miss::NoDevices))
        }
    }

    fn request(&mut self, c: usize, r: usize) -> bool {
        let Some(spec) = self.specs.get(c) else {
            return true;
        };
        let Some(req) = spec.requests.get(r) else {
            return self.request(c + 1, 0);
        };
        for alt in &req.alternatives {
            if let Some(p) = self.st.world.selector_problem.get(alt.selector as usize)
                && p.is_some()
            {
                self.note(&req.name, alt);
                continue;
            }
            let cands = self.candidates(c, alt);
            let ok = match alt.mode {
                AllocationMode::ExactCount(k) => {
                    self.choose(c, r, &req.name, alt, &cands, 0, k as usize)
                }
                AllocationMode::All => self.take_all(c, r, &req.name, alt, &cands),
            };
            if ok {
                return true;
            }
            self.note(&req.name, alt);
            if self.steps >= SEARCH_STEPS {
                return false;
            }
        }
        false
    }

    fn note(&mut self, request: &str, alt: &SubRequest) {
        if self.miss.is_none() {
            let wanted = match alt.mode {
                AllocationMode::ExactCount(k) => k,
                AllocationMode::All => 0,
            };
            self.miss = Some(Miss::Request(request.to_string(), alt.selector, wanted));
        }
    }

    /// Devices the alternative may take now: preferred ones first, then
    /// fewest-wanted first.
    fn candidates(&self, c: usize, alt: &SubRequest) -> Vec<usize> {
        let node = &self.st.node;
        let Some(mask) = node.masks.get(alt.selector as usize) else {
            return Vec::new();
        };
        let mut out: Vec<usize> = mask
            .iter()
            .filter(|&d| self.available(c, d, alt).is_some())
            .collect();
        out.sort_by_key(|&d| (!self.prefer.contains(&(d as u32)), node.demand[d], d));
        out
    }

    /// The capacity the alternative would consume on device `d`, if it
    /// may take it now.
    fn available(&self, c: usize, d: usize, alt: &SubRequest) -> Option<Vec<(String, u64)>> {
        let dev = &self.st.node.devices.devices[d];
        if dev.taints.iter().any(|t| taint_blocks(t, &alt.tolerations)) {
            return None;
        }
        // A device serves one request of one claim once.
        if self.picks[c].iter().any(|p| p.device as usize == d) {
            return None;
        }
        if alt.admin_access {
            return Some(Vec::new());
        }
        if !self.avail.counters_allow(&self.st.node, d) {
            return None;
        }
        if dev.multi {
            let mut consumed = Vec::new();
            for (name, cap) in &dev.capacity {
                let asked = asked_capacity(alt, &dev.driver, name);
                let charge = match &cap.policy {
                    Some(p) => p.charge(asked)?,
                    None => asked.unwrap_or(cap.value),
                };
                let used = self
                    .avail
                    .consumed
                    .get(&(d as u32, name.clone()))
                    .copied()
                    .unwrap_or(0);
                if used.checked_add(charge)? > cap.value {
                    return None;
                }
                consumed.push((name.clone(), charge));
            }
            // A capacity asked that the device does not have.
            if alt
                .capacity
                .keys()
                .any(|k| device_capacity(dev, k).is_none())
            {
                return None;
            }
            return Some(consumed);
        }
        if self.avail.used.contains(d) {
            return None;
        }
        for (name, asked) in &alt.capacity {
            if device_capacity(dev, name).is_none_or(|cap| cap.value < *asked) {
                return None;
            }
        }
        Some(Vec::new())
    }

    /// Whether device `d` keeps claim `c`'s constraints with its picks.
    fn constraints_hold(&self, c: usize, d: usize, request: &str, alt: &SubRequest) -> bool {
        let dev = &self.st.node.devices.devices[d];
        for k in &self.specs[c].constraints {
            if !(k.covers(request) || k.covers(&alt.name)) {
                continue;
            }
            let Some(v) = dev.attribute(&k.attribute) else {
                return false;
            };
            for p in &self.picks[c] {
                let (req, sub) = split_request(&p.request);
                if !(k.covers(req) || k.covers(sub)) {
                    continue;
                }
                let other = self.st.node.devices.devices[p.device as usize].attribute(&k.attribute);
                let same = other == Some(v);
                if k.distinct == same {
                    return false;
                }
            }
        }
        true
    }

    #[allow(clippy::too_many_arguments)]
    fn choose(
        &mut self,
        c: usize,
        r: usize,
        request: &str,
        alt: &SubRequest,
        cands: &[usize],
        from: usize,
        k: usize,
    ) -> bool {
        if k == 0 {
            return self.request(c, r + 1);
        }
        for i in from..cands.len() {
            if cands.len() - i < k {
                return false;
            }
            self.steps += 1;
            if self.steps >= SEARCH_STEPS {
                return false;
            }
            let d = cands[i];
            // Availability may have changed with this claim's earlier
            // picks (counters, shared capacity).
            let Some(consumed) = self.available(c, d, alt) else {
                continue;
            };
            if !self.constraints_hold(c, d, request, alt) {
                continue;
            }
            let pick = Pick {
                device: d as u32,
                request: Arc::from(alt.name.as_str()),
                admin: alt.admin_access,
                consumed,
            };
            self.avail.apply(&self.st.node, &pick);
            self.picks[c].push(pick);
            if self.choose(c, r, request, alt, cands, i + 1, k - 1) {
                return true;
            }
            if let Some(p) = self.picks[c].pop() {
                self.avail.unapply(&self.st.node, &p);
            }
        }
        false
    }

    /// `All` mode: every device the selectors accept, none of them in
    /// use (unless admin access), at least one.
    fn take_all(
        &mut self,
        c: usize,
        r: usize,
        request: &str,
        alt: &SubRequest,
        cands: &[usize],
    ) -> bool {
        let Some(mask) = self.st.node.masks.get(alt.selector as usize) else {
            return false;
        };
        let all: Vec<usize> = mask
            .iter()
            .filter(|&d| {
                let dev = &self.st.node.devices.devices[d];
                !dev.taints.iter().any(|t| taint_blocks(t, &alt.tolerations))
            })
            .collect();
        if all.is_empty() || all.len() != cands.len() {
            return false;
        }
        let before = self.picks[c].len();
        for d in all {
            self.steps += 1;
            let Some(consumed) = self.available(c, d, alt) else {
                self.undo_to(c, before);
                return false;
            };
            if !self.constraints_hold(c, d, request, alt) {
                self.undo_to(c, before);
                return false;
            }
            let pick = Pick {
                device: d as u32,
                request: Arc::from(alt.name.as_str()),
                admin: alt.admin_access,
                consumed,
            };
            self.avail.apply(&self.st.node, &pick);
            self.picks[c].push(pick);
        }
        if self.request(c, r + 1) {
            return true;
        }
        self.undo_to(c, before);
        false
    }

    fn undo_to(&mut self, c: usize, len: usize) {
        while self.picks[c].len() > len {
            if let Some(p) = self.picks[c].pop() {
                self.avail.unapply(&self.st.node, &p);
            }
        }
    }
}

/// A capacity of the device by the name a request uses: fully qualified,
/// or without a domain for the device's driver's.
fn device_capacity<'d>(
    dev: &'d trainyard_model::dra::Device,
    name: &str,
) -> Option<&'d trainyard_model::dra::DeviceCapacity> {
    if name.contains('/') {
        dev.capacity.get(name)
    } else {
        dev.capacity.get(&format!("{}/{name}", dev.driver))
    }
}

/// What the request asks of the device's capacity `qualified`: by that
/// name, or without a domain when the domain is the driver's.
fn asked_capacity(alt: &SubRequest, driver: &str, qualified: &str) -> Option<u64> {
    alt.capacity.get(qualified).copied().or_else(|| {
        let short = qualified.strip_prefix(driver)?.strip_prefix('/')?;
        alt.capacity.get(short).copied()
    })
}

/// `req/sub` → (`req`, `req/sub`); `req` → (`req`, `req`).
pub fn split_request(name: &str) -> (&str, &str) {
    match name.split_once('/') {
        Some((req, _)) => (req, name),
        None => (name, name),
    }
}
