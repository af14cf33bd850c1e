//! Parsing sources into typed objects, object by object.
//!
//! A source is parsed as a stream: each object (each item of a `List`) is
//! recorded into a small token buffer ([`tokens`]), interpreted
//! ([`object::interpret`]: kind, apiVersion, typed form) and dropped
//! before the next is read ([`split`]); no document tree is built. The
//! fast event reader ([`fast`]) parses plain YAML and JSON; anything it
//! does not handle is parsed by serde-saphyr's deserializer into the same
//! splitter. What a source gives is recorded ([`Reader::record`]: names
//! claimed, duplicates found) only once all of it has parsed, so a syntax
//! error leaves nothing of that source behind.

mod fast;
mod object;
mod replay;
mod split;
#[cfg(test)]
mod tests;
mod tokens;

use std::collections::BTreeMap;

use serde::de::DeserializeSeed;
use serde_json::Value;
use trainyard_crd::{ApiError, PodGroup, Queue, TopologyDocument};
use trainyard_model::Node;

use crate::interpret::Objects;
use crate::k8s::PodInfo;
use crate::{LoadError, Source};

/// What interpreting one object found, recorded by [`Reader::record`] at
/// the object's [`Loc`].
#[derive(Debug)]
pub(crate) enum Outcome {
    /// A problem at `field` (relative to the object) of `object`.
    Error {
        object: Option<String>,
        field: String,
        message: String,
    },
    /// A warning, shown after the object's place (`file: document N`).
    Warning(String),
    Node {
        object: String,
        node: Node,
    },
    Pod {
        object: String,
        pod: Box<PodInfo>,
    },
    PriorityClass {
        object: String,
        name: String,
        value: i32,
        /// `preemptionPolicy: Never`.
        never: bool,
    },
    Queue(Queue),
    PodGroup(PodGroup),
    /// A `scheduling.k8s.io` Workload.
    Workload(trainyard_crd::podgroup::upstream::Workload),
    Topology(TopologyDocument),
    /// A DRA object (`resource.k8s.io`).
    Dra(Box<crate::dra::DraObject>),
    /// An object of a kind Trainyard does not use (counted per document).
    Skip(String),
}

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

/// Everything read from all sources, before assembly.
#[derive(Default)]
pub(crate) struct Reader {
    pub objects: Objects,
    /// `Kind ns/name` -> where first defined.
    seen: BTreeMap<String, Loc>,
    /// (source, doc, kind, apiVersion note) -> count of skipped objects.
    skipped: Vec<((String, usize, String), usize)>,
    /// Most tokens the parser held at once (tests check that a List is not
    /// held whole).
    pub(crate) peak_tokens: usize,
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

/// The options every source is parsed with: YAML 1.2 booleans only (a node
/// named `n` or a label value `yes` stays a string; `no` is not `false`),
/// and parser limits that grow with the input.
fn yaml_options(len: usize) -> serde_saphyr::Options {
    serde_saphyr::options! {
        strict_booleans: true,
        budget: Some(yaml_budget(len)),
    }
}

/// A parser error as the loader reports it: the source, the line and the
/// column.
fn yaml_error(source: &Source, e: &serde_saphyr::Error) -> LoadError {
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
}

/// Parses every YAML (or JSON) document of `source` into a tree, with the
/// options the snapshot loader reads its input with (see
/// [`yaml_options`]). A syntax error names the source, the line and the
/// column. An empty source (or one of comments only) has no documents.
/// For small inputs of one shape (settings, simulator specs); the loader
/// itself streams.
pub fn parse_documents(source: &Source) -> Result<Vec<Value>, LoadError> {
    serde_saphyr::from_multiple_with_options::<Value>(&source.text, yaml_options(source.text.len()))
        .map_err(|e| yaml_error(source, &e))
}

/// The documents of `source`, each as what its objects gave: read by the
/// fast reader, or by serde-saphyr's deserializer where the fast one
/// declines; with the most tokens held at once.
fn read_documents(source: &Source) -> Result<(Vec<split::Findings>, usize), LoadError> {
    let text = &source.text;
    let options = yaml_options(text.len());
    let mut splitter = split::Splitter::default();
    if let Some(budget) = &options.budget
        && let Some(docs) = fast::read(text, budget, &mut splitter)
    {
        return Ok((docs, splitter.peak_tokens));
    }
    let docs = serde_saphyr::from_multiple_with_options::<split::Document>(text, options)
        .map_err(|e| yaml_error(source, &e))?;
    let peak = docs.iter().map(|d| d.peak_tokens).max().unwrap_or(0);
    Ok((docs.into_iter().map(|d| d.found).collect(), peak))
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
        let mut splitter = split::Splitter::default();
        match split::Record(&mut splitter).deserialize(value) {
            Ok(()) => {
                for (prefix, outcome) in splitter.finish() {
                    self.record(&loc, prefix, outcome);
                }
            }
            // A `Value` has no duplicate keys; nothing else can fail.
            Err(e) => self.objects.errors.push(loc.error(None, "", e.to_string())),
        }
        self.peak_tokens = self.peak_tokens.max(splitter.peak_tokens);
        self.flush_skipped();
    }

    pub fn read_source(&mut self, source: &Source) {
        match read_documents(source) {
            Ok((docs, peak)) => {
                self.peak_tokens = self.peak_tokens.max(peak);
                for (i, found) in docs.into_iter().enumerate() {
                    let loc = Loc {
                        source: source.name.clone(),
                        doc: i + 1,
                        prefix: String::new(),
                    };
                    for (prefix, outcome) in found {
                        self.record(&loc, prefix, outcome);
                    }
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

    /// Records what one object of the document at `doc` gave; the object
    /// is at `prefix` inside the document.
    fn record(&mut self, doc: &Loc, prefix: String, outcome: Outcome) {
        let loc = &Loc {
            prefix,
            ..doc.clone()
        };
        match outcome {
            Outcome::Error {
                object,
                field,
                message,
            } => self
                .objects
                .errors
                .push(loc.error(object.as_deref(), &field, message)),
            Outcome::Warning(w) => self.objects.warnings.push(format!("{}: {w}", loc.at())),
            Outcome::Node { object, node } => {
                if self.claim(&object, loc) {
                    self.objects.nodes.push((loc.clone(), node));
                }
            }
            Outcome::Pod { object, pod } => {
                if self.claim(&object, loc) {
                    self.objects.pods.push((loc.clone(), *pod));
                }
            }
            Outcome::PriorityClass {
                object,
                name,
                value,
                never,
            } => {
                if self.claim(&object, loc) {
                    if never {
                        self.objects.never_classes.insert(name.clone());
                    }
                    self.objects.priority_classes.insert(name, value);
                }
            }
            Outcome::Queue(q) => {
                if self.claim(&q.object(), loc) {
                    self.objects.queues.push((loc.clone(), q));
                }
            }
            Outcome::PodGroup(pg) => {
                if self.claim(&pg.object(), loc) {
                    self.objects.pod_groups.push((loc.clone(), pg));
                }
            }
            Outcome::Workload(w) => {
                if self.claim(&w.object(), loc) {
                    self.objects.workloads.push((loc.clone(), w));
                }
            }
            Outcome::Topology(t) => {
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
            Outcome::Dra(d) => {
                if self.claim(&d.object(), loc) {
                    self.objects.dra.upsert(loc.clone(), *d);
                }
            }
            Outcome::Skip(kind) => self.skip(loc, kind),
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
