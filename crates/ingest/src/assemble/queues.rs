//! The queue tree from the Queues, and the queue check of a job.

use super::*;

/// The Queues read, as specs for the tree, and where each was read.
pub(crate) struct QueueSpecs {
    specs: Vec<QueueSpec>,
    locs: BTreeMap<String, Loc>,
}

impl QueueSpecs {
    /// The queue a tree error is about and the error at it.
    fn locate(&self, e: &QueueError) -> Option<(String, LoadError)> {
        let (name, field) = match e {
            QueueError::Duplicate { name } => (name.clone(), String::new()),
            QueueError::UnknownParent { queue, .. } => (queue.clone(), "spec.parent".to_string()),
            QueueError::Cycle { queues } => (
                queues.first().cloned().unwrap_or_default(),
                "spec.parent".to_string(),
            ),
            QueueError::QuotaAboveParent {
                parent, resource, ..
            } => (parent.clone(), format!("spec.quota.{resource}")),
            QueueError::QuotaAboveLimit {
                queue, resource, ..
            } => (queue.clone(), format!("spec.quota.{resource}")),
            QueueError::EmptyName => (String::new(), "metadata.name".to_string()),
        };
        let object = format!("Queue {name}");
        let err = match self.locs.get(&name) {
            Some(loc) => loc.error(Some(&object), &field, e.to_string()),
            None => LoadError {
                source_name: String::new(),
                document: None,
                object: Some(object),
                field: (!field.is_empty()).then_some(field),
                message: e.to_string(),
            },
        };
        Some((name, err))
    }
}

/// The tree of the Queues that can be used, and why each other one
/// cannot (the live service's rule: one bad Queue never stops the rest).
#[derive(Clone, Debug, Default)]
pub struct UsableTree {
    pub tree: QueueTree,
    /// Queues left out, by name, with the reason (the offline reader's
    /// words: field and what was expected).
    pub excluded: BTreeMap<String, String>,
    /// Every problem, as the offline reader reports them.
    pub errors: Vec<LoadError>,
}

/// `field: message` of `e` (its object is the queue itself).
fn reason(e: &LoadError) -> String {
    match &e.field {
        Some(f) => format!("{f}: {}", e.message),
        None => e.message.clone(),
    }
}

/// The tree of every Queue that can be used: a Queue whose own spec is
/// invalid, in a parent cycle, under an unknown or excluded parent, with a
/// quota above its limit, or whose children's quotas exceed its own (with
/// its subtree) is left out with its reason, and the rest is built.
pub(crate) fn usable_queue_tree(
    queues: &[(Loc, Queue)],
    default_used: bool,
    opts: &LoadOptions,
) -> UsableTree {
    let mut errors = Vec::new();
    let mut excluded: BTreeMap<String, String> = BTreeMap::new();
    let mut specs = QueueSpecs {
        specs: Vec::new(),
        locs: BTreeMap::new(),
    };
    for (loc, q) in queues {
        let name = q.metadata.name.clone();
        specs.locs.insert(name.clone(), loc.clone());
        match q.to_spec() {
            Ok(s) => specs.specs.push(s),
            Err(errs) => {
                let errs: Vec<LoadError> = errs.0.into_iter().map(|e| loc.api_error(e)).collect();
                let why: Vec<String> = errs.iter().map(reason).collect();
                excluded.insert(name, why.join("; "));
                errors.extend(errs);
            }
        }
    }
    // Each round excludes at least one more queue, or ends.
    for _ in 0..=specs.specs.len() {
        for (name, why) in exclude_below(&specs.specs, &mut excluded) {
            let object = format!("Queue {name}");
            if let Some(loc) = specs.locs.get(&name) {
                errors.push(loc.error(Some(&object), "spec.parent", why));
            }
        }
        let mut usable: Vec<QueueSpec> = specs
            .specs
            .iter()
            .filter(|s| !excluded.contains_key(&s.name))
            .cloned()
            .collect();
        if default_used
            && !specs.locs.contains_key(&opts.default_queue)
            && !excluded.contains_key(&opts.default_queue)
        {
            usable.push(QueueSpec::new(opts.default_queue.clone()));
        }
        let errs = match QueueTree::build(usable) {
            Ok(tree) => {
                return UsableTree {
                    tree,
                    excluded,
                    errors,
                };
            }
            Err(errs) => errs,
        };
        let before = excluded.len();
        for e in &errs {
            if let Some((name, err)) = specs.locate(e) {
                if let QueueError::Cycle { queues } = e {
                    for q in queues {
                        excluded.entry(q.clone()).or_insert_with(|| reason(&err));
                    }
                }
                excluded.entry(name).or_insert_with(|| reason(&err));
                errors.push(err);
            }
        }
        if excluded.len() == before {
            break;
        }
    }
    // Unreachable in practice (every tree error names a queue); an empty
    // tree is the safe answer, with every problem reported.
    UsableTree {
        tree: QueueTree::default(),
        excluded,
        errors,
    }
}

/// Excludes every queue below an excluded one, naming the ancestor;
/// returns those it excluded, with the reason.
fn exclude_below(
    specs: &[QueueSpec],
    excluded: &mut BTreeMap<String, String>,
) -> Vec<(String, String)> {
    let mut all = Vec::new();
    loop {
        let more: Vec<(String, String)> = specs
            .iter()
            .filter(|s| !excluded.contains_key(&s.name))
            .filter_map(|s| {
                let p = s.parent.as_ref()?;
                let why = excluded.get(p)?;
                Some((
                    s.name.clone(),
                    format!("its parent queue \"{p}\" is excluded ({why})"),
                ))
            })
            .collect();
        if more.is_empty() {
            return all;
        }
        excluded.extend(more.iter().cloned());
        all.extend(more);
    }
}

/// Marks `job` rejected when its queue does not exist or is not a leaf.
pub(crate) fn reject_if_bad_queue(tree: &QueueTree, job: &mut Job) {
    match tree.get(&job.queue) {
        None => job.rejected = Some(format!("queue {:?} does not exist", job.queue)),
        Some(id) if !tree.is_leaf(id) => {
            let children: Vec<&str> = tree.children(id).iter().map(|c| tree.name(*c)).collect();
            job.rejected = Some(format!(
                "queue {:?} is not a leaf queue (children: {}); submit jobs to a leaf queue",
                job.queue,
                children.join(", ")
            ));
        }
        Some(_) => {}
    }
}
