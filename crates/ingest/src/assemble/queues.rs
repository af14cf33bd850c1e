//! The queue tree from the Queues, and the queue check of a job.

use super::*;

/// The Queues read, as specs for the tree: a queue whose document is
/// invalid is a placeholder (its name and parent), so its children are
/// still checked without cascading errors.
pub(crate) struct QueueSpecs {
    specs: Vec<QueueSpec>,
    locs: BTreeMap<String, Loc>,
    failed: BTreeSet<String>,
}

impl QueueSpecs {
    pub(crate) fn of(queues: &[(Loc, Queue)], errors: &mut Vec<LoadError>) -> QueueSpecs {
        let mut out = QueueSpecs {
            specs: Vec::new(),
            locs: BTreeMap::new(),
            failed: BTreeSet::new(),
        };
        for (loc, q) in queues {
            out.locs.insert(q.metadata.name.clone(), loc.clone());
            match q.to_spec() {
                Ok(s) => out.specs.push(s),
                Err(errs) => {
                    let mut placeholder = QueueSpec::new(q.metadata.name.clone());
                    placeholder.parent = q.spec.parent.clone();
                    out.specs.push(placeholder);
                    out.failed.insert(q.metadata.name.clone());
                    errors.extend(errs.0.into_iter().map(|e| loc.api_error(e)));
                }
            }
        }
        out
    }

    /// The tree, with the implicit default queue when `default_used` and
    /// no Queue defines it; or its problems, each at its Queue.
    pub(crate) fn tree(
        mut self,
        default_used: bool,
        opts: &LoadOptions,
    ) -> Result<QueueTree, Vec<LoadError>> {
        if default_used && !self.locs.contains_key(&opts.default_queue) {
            self.specs.push(QueueSpec::new(opts.default_queue.clone()));
        }
        let errs = match QueueTree::build(self.specs) {
            Ok(t) => return Ok(t),
            Err(errs) => errs,
        };
        let mut out = Vec::new();
        for e in errs {
            if let QueueError::QuotaAboveParent { parent, .. } = &e
                && self.failed.contains(parent)
            {
                // The parent is a placeholder; its own errors are reported.
                continue;
            }
            let (name, field) = match &e {
                QueueError::Duplicate { name } => (name.clone(), String::new()),
                QueueError::UnknownParent { queue, .. } => {
                    (queue.clone(), "spec.parent".to_string())
                }
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
            out.push(match self.locs.get(&name) {
                Some(loc) => loc.error(Some(&object), &field, e.to_string()),
                None => LoadError {
                    source_name: String::new(),
                    document: None,
                    object: Some(object),
                    field: (!field.is_empty()).then_some(field),
                    message: e.to_string(),
                },
            });
        }
        Err(out)
    }
}

/// The queue tree of `queues` (see [`QueueSpecs`]).
pub(crate) fn queue_tree(
    queues: &[(Loc, Queue)],
    default_used: bool,
    opts: &LoadOptions,
) -> Result<QueueTree, Vec<LoadError>> {
    let mut errors = Vec::new();
    let specs = QueueSpecs::of(queues, &mut errors);
    match specs.tree(default_used, opts) {
        Ok(t) if errors.is_empty() => Ok(t),
        Ok(_) => Err(errors),
        Err(e) => {
            errors.extend(e);
            Err(errors)
        }
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
