//! Parsing sources into typed objects, document by document.

use std::collections::BTreeMap;

use serde_json::Value;
use trainyard_crd::queue::QUEUE_API_VERSIONS;
use trainyard_crd::topology::TOPOLOGY_API_VERSIONS;
use trainyard_crd::{ApiError, ApiErrors, PodGroup, Queue, TopologyDocument, describe_object};

use crate::interpret::Objects;
use crate::k8s::{FieldError, K8sNode, K8sPod, K8sPriorityClass};
use crate::{LoadError, Source};

/// Where an object came from: source, document, and the path prefix of the
/// object inside the document (`items[3].` inside a List).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Loc {
    pub source: String,
    /// 1-based document number in the source; 0 for an object that came
    /// alone, not from a file (a watch event names its object instead).
    pub doc: usize,
    pub prefix: String,
}

impl Loc {
    /// An error at `field` (relative to the object) of `object`.
    pub fn error(
        &self,
        object: Option<&str>,
        field: &str,
        message: impl Into<String>,
    ) -> LoadError {
        let field = match (self.prefix.is_empty(), field.is_empty()) {
            (true, true) => None,
            (true, false) => Some(field.to_string()),
            (false, true) => Some(self.prefix.trim_end_matches('.').to_string()),
            (false, false) => Some(format!("{}{field}", self.prefix)),
        };
        LoadError {
            source_name: self.source.clone(),
            document: (self.doc > 0).then_some(self.doc),
            object: object.map(str::to_string),
            field,
            message: message.into(),
        }
    }

    pub fn api_error(&self, e: ApiError) -> LoadError {
        self.error(Some(&e.object), &e.field, e.message)
    }

    /// `file: document N` (for warnings and cross-references).
    pub fn at(&self) -> String {
        let mut s = if self.doc > 0 {
            format!("{}: document {}", self.source, self.doc)
        } else {
            self.source.clone()
        };
        if !self.prefix.is_empty() {
            s.push_str(&format!(" ({})", self.prefix.trim_end_matches('.')));
        }
        s
    }
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a sequence",
        Value::Object(_) => "a mapping",
    }
}

/// Everything read from all sources, before assembly.
#[derive(Default)]
pub(crate) struct Reader {
    pub objects: Objects,
    /// `Kind ns/name` -> where first defined.
    seen: BTreeMap<String, Loc>,
    /// (source, doc, kind, apiVersion note) -> count of skipped objects.
    skipped: Vec<((String, usize, String), usize)>,
}

/// Parser limits that grow with the input. The parser's defaults (250,000
/// nodes, 1,024 documents) reject a real `kubectl get pods -A -o yaml` of
/// about a thousand pods. A YAML node or document needs at least a few
/// bytes of input, so limits proportional to the length accept any honest
/// file. Aliases, anchors and nesting keep the defaults, which guard
/// against expansion bombs.
fn yaml_budget(len: usize) -> serde_saphyr::Budget {
    let mut b = serde_saphyr::Budget::default();
    b.max_nodes = b.max_nodes.max(len);
    b.max_events = b.max_events.max(len.saturating_mul(2));
    b.max_documents = b.max_documents.max(len / 4);
    b.max_total_scalar_bytes = b.max_total_scalar_bytes.max(len);
    b
}

/// The documents of `docs` that are not empty (`---` with nothing after
/// it, or comments only, is `null`), each with its 1-based number in the
/// source, for inputs that hold one document of their own kind.
pub fn present_documents(docs: Vec<Value>) -> impl Iterator<Item = (usize, Value)> {
    docs.into_iter()
        .enumerate()
        .filter(|(_, d)| !d.is_null())
        .map(|(i, d)| (i + 1, d))
}

/// Every object of `docs` alone, as an API server holds and lists them:
/// the documents, and the items of `List`s (nested lists too); items of a
/// typed list (`PodList`) without `kind` or `apiVersion` get the ones the
/// list implies, as the reader gives them. Empty documents are dropped.
pub fn split_objects(docs: Vec<Value>) -> Vec<Value> {
    let mut out = Vec::new();
    let mut stack: Vec<Value> = docs.into_iter().filter(|d| !d.is_null()).rev().collect();
    while let Some(doc) = stack.pop() {
        let kind = doc["kind"].as_str().unwrap_or("").to_string();
        if !(kind.ends_with("List") && doc.get("items").is_some()) {
            out.push(doc);
            continue;
        }
        let api = doc["apiVersion"].clone();
        let item_kind = kind.trim_end_matches("List").to_string();
        let items = doc["items"].as_array().cloned().unwrap_or_default();
        for mut item in items.into_iter().rev() {
            if item.get("kind").is_none_or(Value::is_null) && !item_kind.is_empty() {
                item["kind"] = item_kind.clone().into();
            }
            if item.get("apiVersion").is_none_or(Value::is_null) {
                item["apiVersion"] = api.clone();
            }
            stack.push(item);
        }
    }
    out
}

/// Parses every YAML (or JSON) document of `source` into a tree, as the
/// snapshot loader reads its input: YAML 1.2 booleans only (a node named
/// `n` or a label value `yes` stays a string; `no` is not `false`), and
/// parser limits that grow with the input. A syntax
/// error names the source, the line and the column. An empty source (or
/// one of comments only) has no documents.
pub fn parse_documents(source: &Source) -> Result<Vec<Value>, LoadError> {
    let options = serde_saphyr::options! {
        strict_booleans: true,
        budget: Some(yaml_budget(source.text.len())),
    };
    serde_saphyr::from_multiple_with_options::<Value>(&source.text, options).map_err(|e| {
        let e = e.without_snippet();
        let mut message = format!("invalid YAML: {e}");
        if let Some(l) = e.location()
            && !message.contains(&format!("line {}", l.line()))
        {
            message.push_str(&format!(" (line {}, column {})", l.line(), l.column()));
        }
        LoadError {
            source_name: source.name.clone(),
            document: None,
            object: None,
            field: None,
            message,
        }
    })
}

impl Reader {
    /// Reads one object that came alone (an item of an API list or a watch
    /// event), named `origin` in messages (e.g. `watch pods`), exactly as
    /// an object of a file is read.
    pub fn read_object(&mut self, value: &Value, origin: &str) {
        let loc = Loc {
            source: origin.to_string(),
            doc: 0,
            prefix: String::new(),
        };
        self.visit(value, &loc, None);
        self.flush_skipped();
    }

    pub fn read_source(&mut self, source: &Source) {
        match parse_documents(source) {
            Ok(docs) => {
                for (i, doc) in docs.iter().enumerate() {
                    let loc = Loc {
                        source: source.name.clone(),
                        doc: i + 1,
                        prefix: String::new(),
                    };
                    self.visit(doc, &loc, None);
                }
            }
            Err(e) => self.objects.errors.push(e),
        }
        self.flush_skipped();
    }

    fn flush_skipped(&mut self) {
        for ((src, doc, kind), n) in std::mem::take(&mut self.skipped) {
            let what = if n == 1 {
                "object".to_string()
            } else {
                format!("{n} objects")
            };
            let at = if doc > 0 {
                format!("{src}: document {doc}")
            } else {
                src
            };
            self.objects.warnings.push(format!(
                "{at}: skipped {what} of kind {kind} (not used by Trainyard)"
            ));
        }
    }

    fn skip(&mut self, loc: &Loc, kind: String) {
        let key = (loc.source.clone(), loc.doc, kind);
        match self.skipped.iter_mut().find(|(k, _)| *k == key) {
            Some((_, n)) => *n += 1,
            None => self.skipped.push((key, 1)),
        }
    }

    /// Records `object` as defined at `loc`; false (with an error) if it
    /// was already defined.
    fn claim(&mut self, object: &str, loc: &Loc) -> bool {
        if let Some(first) = self.seen.get(object) {
            let msg = format!(
                "defined more than once: first in {}, again in {}",
                first.at(),
                loc.at()
            );
            self.objects.errors.push(loc.error(Some(object), "", msg));
            return false;
        }
        self.seen.insert(object.to_string(), loc.clone());
        true
    }

    fn field_errors(&mut self, loc: &Loc, object: &str, errs: Vec<FieldError>) {
        for (field, msg) in errs {
            self.objects
                .errors
                .push(loc.error(Some(object), &field, msg));
        }
    }

    fn api_errors(&mut self, loc: &Loc, errs: ApiErrors) {
        for e in errs.0 {
            self.objects.errors.push(loc.api_error(e));
        }
    }

    fn visit(&mut self, value: &Value, loc: &Loc, inherited: Option<(&str, &str)>) {
        let Some(map) = value.as_object() else {
            self.objects.errors.push(loc.error(
                None,
                "",
                format!(
                    "expected a Kubernetes object (a mapping with apiVersion and kind), found {}",
                    json_type(value)
                ),
            ));
            return;
        };
        // Items of typed lists (PodList, NodeList) may omit kind/apiVersion.
        let filled;
        let value = match inherited {
            Some((kind, api))
                if map.get("kind").is_none_or(Value::is_null)
                    || map.get("apiVersion").is_none_or(Value::is_null) =>
            {
                let mut m = map.clone();
                if m.get("kind").is_none_or(Value::is_null) {
                    m.insert("kind".into(), Value::String(kind.to_string()));
                }
                if m.get("apiVersion").is_none_or(Value::is_null) {
                    m.insert("apiVersion".into(), Value::String(api.to_string()));
                }
                filled = Value::Object(m);
                &filled
            }
            _ => value,
        };
        let kind = match value.get("kind") {
            Some(Value::String(k)) if !k.is_empty() => k.clone(),
            None | Some(Value::Null) => {
                let name = value
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .map(|n| format!("object {n:?}"));
                self.objects.errors.push(loc.error(
                    name.as_deref(),
                    "kind",
                    "missing; expected the object's kind, such as Node, Pod, PriorityClass, Queue, PodGroup, Topology or List",
                ));
                return;
            }
            Some(other) => {
                self.objects.errors.push(loc.error(
                    None,
                    "kind",
                    format!("expected a string such as \"Pod\", found {other}"),
                ));
                return;
            }
        };
        let object = describe_object(&kind, value);
        let expected_api = match kind.as_str() {
            "Node" | "Pod" | "List" => "\"v1\"",
            "PriorityClass" => "\"scheduling.k8s.io/v1\"",
            "Queue" | "PodGroup" | "Topology" => "\"trainyard.io/v1alpha1\"",
            _ => "the object's apiVersion",
        };
        let api = match value.get("apiVersion") {
            Some(Value::String(a)) if !a.is_empty() => a.clone(),
            None | Some(Value::Null) => {
                self.objects.errors.push(loc.error(
                    Some(&object),
                    "apiVersion",
                    format!("missing; expected {expected_api}"),
                ));
                return;
            }
            Some(other) => {
                self.objects.errors.push(loc.error(
                    Some(&object),
                    "apiVersion",
                    format!("expected a string such as {expected_api}, found {other}"),
                ));
                return;
            }
        };
        let bad_api = |this: &mut Self| {
            this.objects.errors.push(loc.error(
                Some(&object),
                "apiVersion",
                format!("expected {expected_api} for kind {kind}, found {api:?}"),
            ));
        };
        match kind.as_str() {
            k if k == "List" || (k.ends_with("List") && value.get("items").is_some()) => {
                let item_kind = k.strip_suffix("List").filter(|s| !s.is_empty());
                match value.get("items") {
                    None | Some(Value::Null) => {}
                    Some(Value::Array(items)) => {
                        for (i, item) in items.iter().enumerate() {
                            let item_loc = Loc {
                                prefix: format!("{}items[{i}].", loc.prefix),
                                ..loc.clone()
                            };
                            self.visit(item, &item_loc, item_kind.map(|ik| (ik, api.as_str())));
                        }
                    }
                    Some(other) => self.objects.errors.push(loc.error(
                        Some(&kind),
                        "items",
                        format!("expected a sequence of objects, found {}", json_type(other)),
                    )),
                }
            }
            "Node" => {
                if api != "v1" {
                    return bad_api(self);
                }
                let node: K8sNode = match trainyard_crd::from_value(value, &object) {
                    Ok(n) => n,
                    Err(e) => return self.objects.errors.push(loc.api_error(e)),
                };
                let mut warnings = Vec::new();
                let converted = node.convert(&mut warnings);
                self.objects
                    .warnings
                    .extend(warnings.into_iter().map(|w| format!("{}: {w}", loc.at())));
                match converted {
                    Ok(n) => {
                        if self.claim(&object, loc) {
                            self.objects.nodes.push((loc.clone(), n));
                        }
                    }
                    Err(errs) => self.field_errors(loc, &object, errs),
                }
            }
            "Pod" => {
                if api != "v1" {
                    return bad_api(self);
                }
                let pod: K8sPod = match trainyard_crd::from_value(value, &object) {
                    Ok(p) => p,
                    Err(e) => return self.objects.errors.push(loc.api_error(e)),
                };
                let mut warnings = Vec::new();
                let converted = pod.convert(&mut warnings);
                self.objects
                    .warnings
                    .extend(warnings.into_iter().map(|w| format!("{}: {w}", loc.at())));
                match converted {
                    Ok(p) => {
                        if self.claim(&object, loc) {
                            self.objects.pods.push((loc.clone(), p));
                        }
                    }
                    Err(errs) => self.field_errors(loc, &object, errs),
                }
            }
            "PriorityClass" => {
                if !api.starts_with("scheduling.k8s.io/") {
                    return bad_api(self);
                }
                let pc: K8sPriorityClass = match trainyard_crd::from_value(value, &object) {
                    Ok(p) => p,
                    Err(e) => return self.objects.errors.push(loc.api_error(e)),
                };
                if pc.metadata.name.is_empty() {
                    return self.objects.errors.push(loc.error(
                        Some(&object),
                        "metadata.name",
                        "missing; every PriorityClass needs a name",
                    ));
                }
                if self.claim(&object, loc) {
                    if pc.preemption_policy.0 {
                        self.objects.never_classes.insert(pc.metadata.name.clone());
                    }
                    self.objects
                        .priority_classes
                        .insert(pc.metadata.name, pc.value);
                }
            }
            "Queue" if !QUEUE_API_VERSIONS.contains(&api.as_str()) => {
                // Someone else's Queue kind (Kueue's is LocalQueue): not ours.
                self.skip(loc, format!("Queue ({api})"));
            }
            "Queue" => match Queue::from_any(value) {
                Ok(Some(q)) => {
                    for w in &q.warnings {
                        self.objects.warnings.push(format!(
                            "{}: {} ({api}): {w}",
                            loc.at(),
                            q.object()
                        ));
                    }
                    if self.claim(&q.object(), loc) {
                        self.objects.queues.push((loc.clone(), q));
                    }
                }
                Ok(None) => self.objects.warnings.push(format!(
                    "{}: {object} ({api}) is Volcano's root queue: not a queue in Trainyard's tree; its children are top-level queues",
                    loc.at()
                )),
                Err(errs) => self.api_errors(loc, errs),
            },
            "PodGroup" => match PodGroup::from_value(value) {
                Ok(pg) => {
                    if let Err(errs) = pg.validate() {
                        self.api_errors(loc, errs);
                    }
                    // Checked here, so that a PodGroup no pod names is
                    // checked too.
                    if let Err(e) = pg.metadata.creation_time() {
                        self.objects.errors.push(loc.error(
                            Some(&pg.object()),
                            "metadata.creationTimestamp",
                            e.to_string(),
                        ));
                    }
                    if self.claim(&pg.object(), loc) {
                        self.objects.pod_groups.push((loc.clone(), pg));
                    }
                }
                Err(errs) => self.api_errors(loc, errs),
            },
            "Topology" if !TOPOLOGY_API_VERSIONS.contains(&api.as_str()) => {
                // Someone else's Topology kind: not ours.
                self.skip(loc, format!("Topology ({api})"));
            }
            "Topology" => match TopologyDocument::from_value(value) {
                Ok(t) => {
                    if let Err(errs) = t.validate() {
                        self.api_errors(loc, errs);
                    }
                    if let Some((first_loc, first)) = &self.objects.topology
                        && first.object() != t.object()
                    {
                        let msg = format!(
                            "a snapshot has at most one Topology document; {} is already defined in {}",
                            first.object(),
                            first_loc.at()
                        );
                        self.objects
                            .errors
                            .push(loc.error(Some(&t.object()), "", msg));
                    } else if self.claim(&t.object(), loc) {
                        self.objects.topology = Some((loc.clone(), t));
                    }
                }
                Err(errs) => self.api_errors(loc, errs),
            },
            _ => self.skip(loc, kind),
        }
    }
}

#[cfg(test)]
mod budget_tests {
    use crate::{LoadOptions, Source, load};

    #[test]
    fn large_snapshots_load() {
        // Beyond the YAML parser's defaults: 1,500 documents and more than
        // 250,000 YAML nodes (each pod carries 150 labels).
        let labels: String = (0..150).map(|k| format!("l{k}: v, ")).collect();
        let mut text = String::new();
        for i in 0..1500 {
            text.push_str(&format!(
                "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: p{i}, namespace: ml, labels: {{{labels}}}}}\nspec: {{schedulerName: trainyard, containers: [{{name: c, resources: {{requests: {{cpu: 100m}}}}}}]}}\n"
            ));
        }
        let loaded =
            load(&[Source::new("big.yaml", text)], &LoadOptions::default()).expect("loads");
        assert_eq!(loaded.snapshot.jobs.len(), 1500);
    }
}
