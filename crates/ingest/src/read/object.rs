//! The one interpretation of an object read from a file or a watch: its
//! kind and apiVersion checked, then converted to its typed form (Node,
//! Pod, PriorityClass, Queue, PodGroup, Topology), a List split into its
//! items, other kinds skipped. What is found is returned as [`Outcome`]s
//! with the path prefix of the object; the reader records them (claims
//! names, keeps the Topology) once the whole source has parsed.

use serde::de::DeserializeOwned;
use serde_json::Value;
use trainyard_crd::queue::QUEUE_API_VERSIONS;
use trainyard_crd::topology::TOPOLOGY_API_VERSIONS;
use trainyard_crd::{ApiError, ApiErrors, PodGroup, Queue, TopologyDocument, describe_object};

use super::Outcome;
use super::replay::Replay;
use super::tokens::{Tok, Tokens};
use crate::dra::{DraKind, DraObject};
use crate::k8s::{
    FieldError, K8sDeviceClass, K8sDeviceTaintRule, K8sNode, K8sPod, K8sPriorityClass,
    K8sResourceClaim, K8sResourceClaimTemplate, K8sResourceSlice,
};

/// A `kind` or `apiVersion` field.
enum Field<'a> {
    /// Absent or null.
    Missing,
    Str(&'a str),
    /// Anything else, at this index.
    Other(usize),
}

impl<'a> Field<'a> {
    fn of(t: &'a Tokens, object: usize, key: &str) -> Self {
        match t.get(object, key) {
            None => Field::Missing,
            Some(i) if t.is_null(i) => Field::Missing,
            Some(i) => t.str_at(i).map_or(Field::Other(i), Field::Str),
        }
    }

    /// The field as a `Value` shows it in a message.
    fn shown(&self, t: &Tokens) -> String {
        match self {
            Field::Missing => "null".to_string(),
            Field::Str(s) => Value::String((*s).to_string()).to_string(),
            Field::Other(i) => t.to_value(*i).to_string(),
        }
    }
}

/// A missing field takes what the typed list it is an item of implies.
fn inherit<'a>(field: Field<'a>, implied: Option<&'a str>) -> Field<'a> {
    match (field, implied) {
        (Field::Missing, Some(v)) => Field::Str(v),
        (field, _) => field,
    }
}

/// Collects the findings of one object under its prefix.
struct Out<'a> {
    prefix: &'a str,
    out: &'a mut Vec<(String, Outcome)>,
}

impl Out<'_> {
    fn push(&mut self, o: Outcome) {
        self.out.push((self.prefix.to_string(), o));
    }

    fn error(&mut self, object: Option<&str>, field: &str, message: impl Into<String>) {
        self.push(Outcome::Error {
            object: object.map(str::to_string),
            field: field.to_string(),
            message: message.into(),
        });
    }

    fn api_error(&mut self, e: ApiError) {
        self.push(Outcome::Error {
            object: Some(e.object),
            field: e.field,
            message: e.message,
        });
    }

    fn api_errors(&mut self, errs: ApiErrors) {
        for e in errs.0 {
            self.api_error(e);
        }
    }

    fn field_errors(&mut self, object: &str, errs: Vec<FieldError>) {
        for (field, message) in errs {
            self.error(Some(object), &field, message);
        }
    }

    fn warnings(&mut self, warnings: Vec<String>) {
        for w in warnings {
            self.push(Outcome::Warning(w));
        }
    }
}

/// Deserializes the object at `i` into `T`; on failure the error carries
/// the field path and a plain message, as [`trainyard_crd::from_value`]
/// gives them for the same object as a `Value`.
pub(super) fn typed<T: DeserializeOwned>(
    t: &Tokens,
    i: usize,
    object: &str,
) -> Result<T, ApiError> {
    match T::deserialize(Replay::new(t, i)) {
        Ok(v) => Ok(v),
        // Replayed again, with the path tracked: the same error, now placed.
        Err(_) => serde_path_to_error::deserialize(Replay::new(t, i)).map_err(|e| {
            let path = e.path().to_string();
            let field = if path == "." { String::new() } else { path };
            ApiError::new(
                object,
                field,
                trainyard_crd::de::plain_message(&e.into_inner().to_string()),
            )
        }),
    }
}

/// The object at `i` as a `Value`, with the kind and apiVersion of a typed
/// list filled in where it has none.
fn filled_value(t: &Tokens, i: usize, inherited: Option<(&str, &str)>) -> Value {
    let mut v = t.to_value(i);
    if let (Some((kind, api)), Value::Object(m)) = (inherited, &mut v) {
        if m.get("kind").is_none_or(Value::is_null) {
            m.insert("kind".into(), Value::String(kind.to_string()));
        }
        if m.get("apiVersion").is_none_or(Value::is_null) {
            m.insert("apiVersion".into(), Value::String(api.to_string()));
        }
    }
    v
}

/// The object's name as `describe_object` reads it: only its metadata's
/// name and namespace, and only when they are strings.
fn describe(t: &Tokens, i: usize, kind: &str) -> String {
    let mut meta = serde_json::Map::new();
    if let Some(m) = t
        .get(i, "metadata")
        .filter(|&m| matches!(t.tok(m), Tok::Map { .. }))
    {
        for key in ["name", "namespace"] {
            if let Some(s) = t.get(m, key).and_then(|v| t.str_at(v)) {
                meta.insert(key.into(), Value::String(s.to_string()));
            }
        }
    }
    if DraKind::parse(kind).is_some_and(DraKind::namespaced) {
        let s = |k: &str| {
            meta.get(k)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
        };
        let ns = s("namespace").unwrap_or("default");
        return format!("{kind} {ns}/{}", s("name").unwrap_or("<unnamed>"));
    }
    let mut object = serde_json::Map::new();
    object.insert("metadata".into(), Value::Object(meta));
    describe_object(kind, &Value::Object(object))
}

/// The `resource.k8s.io` versions read: `v1`, and `v1beta2`, whose shape
/// is the same for every field Trainyard reads; `v1alpha3` for
/// DeviceTaintRule (its only version). `v1beta1` is refused by name: its
/// requests and devices have another shape.
fn dra_api_problem(kind: DraKind, api: &str) -> Option<String> {
    let version = api.strip_prefix("resource.k8s.io/");
    let ok = match kind {
        DraKind::DeviceTaintRule => version == Some("v1alpha3"),
        _ => matches!(version, Some("v1" | "v1beta2")),
    };
    if ok {
        return None;
    }
    let expected = match kind {
        DraKind::DeviceTaintRule => "\"resource.k8s.io/v1alpha3\"",
        _ => "\"resource.k8s.io/v1\" (or v1beta2)",
    };
    Some(match version {
        Some("v1beta1") => format!(
            "{api:?} is not supported: its shape differs from resource.k8s.io/v1 (requests without exactly/firstAvailable, devices under basic); expected {expected}; convert the object (kubectl get -o yaml from a cluster serving v1 gives it)"
        ),
        _ => format!(
            "expected {expected} for kind {}, found {api:?}",
            kind.as_str()
        ),
    })
}

/// A DRA object at `i`, read and converted.
fn dra_object(t: &Tokens, i: usize, kind: DraKind, object: &str, out: &mut Out<'_>) {
    let mut warnings = Vec::new();
    let converted: Result<DraObject, Vec<FieldError>> = match kind {
        DraKind::ResourceSlice => match typed::<K8sResourceSlice>(t, i, object) {
            Ok(s) => s.convert(&mut warnings),
            Err(e) => return out.api_error(e),
        },
        DraKind::DeviceClass => match typed::<K8sDeviceClass>(t, i, object) {
            Ok(c) => c.convert(),
            Err(e) => return out.api_error(e),
        },
        DraKind::ResourceClaim => match typed::<K8sResourceClaim>(t, i, object) {
            Ok(c) => c.convert(&mut warnings),
            Err(e) => return out.api_error(e),
        },
        DraKind::ResourceClaimTemplate => match typed::<K8sResourceClaimTemplate>(t, i, object) {
            Ok(c) => c.convert(),
            Err(e) => return out.api_error(e),
        },
        DraKind::DeviceTaintRule => match typed::<K8sDeviceTaintRule>(t, i, object) {
            Ok(r) => r.convert(),
            Err(e) => return out.api_error(e),
        },
    };
    out.warnings(warnings);
    match converted {
        Ok(d) => out.push(Outcome::Dra(Box::new(d))),
        Err(errs) => out.field_errors(object, errs),
    }
}

/// Interprets the value at `i` of `t` (an object, or a List of them),
/// found at `prefix` inside its document; `inherited` is the kind and
/// apiVersion of the typed list it is an item of.
pub(crate) fn interpret(
    t: &Tokens,
    i: usize,
    prefix: &str,
    inherited: Option<(&str, &str)>,
    out: &mut Vec<(String, Outcome)>,
) {
    let mut out = Out { prefix, out };
    if !matches!(t.tok(i), Tok::Map { .. }) {
        return out.error(
            None,
            "",
            format!(
                "expected a Kubernetes object (a mapping with apiVersion and kind), found {}",
                t.type_name(i)
            ),
        );
    }
    // Items of typed lists (PodList, NodeList) may omit kind/apiVersion.
    let kind = inherit(Field::of(t, i, "kind"), inherited.map(|(k, _)| k));
    let kind = match kind {
        Field::Str(k) if !k.is_empty() => k,
        Field::Missing => {
            let name = t
                .get(i, "metadata")
                .filter(|&m| matches!(t.tok(m), Tok::Map { .. }))
                .and_then(|m| t.get(m, "name"))
                .and_then(|n| t.str_at(n))
                .map(|n| format!("object {n:?}"));
            return out.error(
                name.as_deref(),
                "kind",
                "missing; expected the object's kind, such as Node, Pod, PriorityClass, Queue, PodGroup, Topology or List",
            );
        }
        other => {
            return out.error(
                None,
                "kind",
                format!(
                    "expected a string such as \"Pod\", found {}",
                    other.shown(t)
                ),
            );
        }
    };
    let object = describe(t, i, kind);
    let expected_api = match kind {
        "Node" | "Pod" | "List" => "\"v1\"",
        "PriorityClass" => "\"scheduling.k8s.io/v1\"",
        "Queue" | "Topology" => "\"trainyard.io/v1alpha1\"",
        "PodGroup" => "\"trainyard.io/v1alpha1\" or \"scheduling.k8s.io/v1beta1\"",
        "Workload" => "\"scheduling.k8s.io/v1beta1\" or \"scheduling.k8s.io/v1alpha2\"",
        "DeviceTaintRule" => "\"resource.k8s.io/v1alpha3\"",
        k if DraKind::parse(k).is_some() => "\"resource.k8s.io/v1\"",
        _ => "the object's apiVersion",
    };
    let api = match inherit(Field::of(t, i, "apiVersion"), inherited.map(|(_, a)| a)) {
        Field::Str(a) if !a.is_empty() => a,
        Field::Missing => {
            return out.error(
                Some(&object),
                "apiVersion",
                format!("missing; expected {expected_api}"),
            );
        }
        other => {
            return out.error(
                Some(&object),
                "apiVersion",
                format!(
                    "expected a string such as {expected_api}, found {}",
                    other.shown(t)
                ),
            );
        }
    };
    let bad_api = |out: &mut Out<'_>| {
        out.error(
            Some(&object),
            "apiVersion",
            format!("expected {expected_api} for kind {kind}, found {api:?}"),
        );
    };
    if let Some(dk) = DraKind::parse(kind) {
        if let Some(problem) = dra_api_problem(dk, api) {
            return out.error(Some(&object), "apiVersion", problem);
        }
        return dra_object(t, i, dk, &object, &mut out);
    }
    match kind {
        k if k == "List" || (k.ends_with("List") && t.get(i, "items").is_some()) => {
            let item_kind = k.strip_suffix("List").filter(|s| !s.is_empty());
            match t.get(i, "items") {
                None => {}
                Some(items) => match t.tok(items) {
                    Tok::Null => {}
                    Tok::Seq { .. } => {
                        for (n, item) in t.elements(items).enumerate() {
                            let prefix = format!("{prefix}items[{n}].");
                            interpret(t, item, &prefix, item_kind.map(|ik| (ik, api)), out.out);
                        }
                    }
                    _ => out.error(
                        Some(kind),
                        "items",
                        format!(
                            "expected a sequence of objects, found {}",
                            t.type_name(items)
                        ),
                    ),
                },
            }
        }
        "Node" => {
            if api != "v1" {
                return bad_api(&mut out);
            }
            let node: K8sNode = match typed(t, i, &object) {
                Ok(n) => n,
                Err(e) => return out.api_error(e),
            };
            let mut warnings = Vec::new();
            let converted = node.convert(&mut warnings);
            out.warnings(warnings);
            match converted {
                Ok(node) => out.push(Outcome::Node { object, node }),
                Err(errs) => out.field_errors(&object, errs),
            }
        }
        "Pod" => {
            if api != "v1" {
                return bad_api(&mut out);
            }
            let pod: K8sPod = match typed(t, i, &object) {
                Ok(p) => p,
                Err(e) => return out.api_error(e),
            };
            let mut warnings = Vec::new();
            let converted = pod.convert(&mut warnings);
            out.warnings(warnings);
            match converted {
                Ok(pod) => out.push(Outcome::Pod {
                    object,
                    pod: Box::new(pod),
                }),
                Err(errs) => out.field_errors(&object, errs),
            }
        }
        "PriorityClass" => {
            if !api.starts_with("scheduling.k8s.io/") {
                return bad_api(&mut out);
            }
            let pc: K8sPriorityClass = match typed(t, i, &object) {
                Ok(p) => p,
                Err(e) => return out.api_error(e),
            };
            if pc.metadata.name.is_empty() {
                return out.error(
                    Some(&object),
                    "metadata.name",
                    "missing; every PriorityClass needs a name",
                );
            }
            out.push(Outcome::PriorityClass {
                object,
                name: pc.metadata.name,
                value: pc.value,
                never: pc.preemption_policy.0,
            });
        }
        "Queue" if !QUEUE_API_VERSIONS.contains(&api) => {
            // Someone else's Queue kind (Kueue's is LocalQueue): not ours.
            out.push(Outcome::Skip(format!("Queue ({api})")));
        }
        "Queue" => match Queue::from_any(&filled_value(t, i, inherited)) {
            Ok(Some(q)) => {
                let warnings = q
                    .warnings
                    .iter()
                    .map(|w| format!("{} ({api}): {w}", q.object()))
                    .collect();
                out.warnings(warnings);
                out.push(Outcome::Queue(q));
            }
            Ok(None) => out.push(Outcome::Warning(format!(
                "{object} ({api}) is Volcano's root queue: not a queue in Trainyard's tree; its children are top-level queues"
            ))),
            Err(errs) => out.api_errors(errs),
        },
        "PodGroup" => match PodGroup::from_value(&filled_value(t, i, inherited)) {
            Ok(pg) => {
                if let Err(errs) = pg.validate() {
                    out.api_errors(errs);
                }
                // Checked here, so that a PodGroup no pod names is
                // checked too.
                if let Err(e) = pg.metadata.creation_time() {
                    out.error(
                        Some(&pg.object()),
                        "metadata.creationTimestamp",
                        e.to_string(),
                    );
                }
                out.push(Outcome::PodGroup(pg));
            }
            Err(errs) => out.api_errors(errs),
        },
        "Workload" if !api.starts_with("scheduling.k8s.io/") => {
            out.push(Outcome::Skip(format!("Workload ({api})")));
        }
        "Workload" => {
            match trainyard_crd::podgroup::upstream::Workload::from_value(&filled_value(
                t, i, inherited,
            )) {
                Ok(w) => out.push(Outcome::Workload(w)),
                Err(errs) => out.api_errors(errs),
            }
        }
        "Topology" if !TOPOLOGY_API_VERSIONS.contains(&api) => {
            // Someone else's Topology kind: not ours.
            out.push(Outcome::Skip(format!("Topology ({api})")));
        }
        "Topology" => match TopologyDocument::from_value(&filled_value(t, i, inherited)) {
            Ok(topology) => {
                if let Err(errs) = topology.validate() {
                    out.api_errors(errs);
                }
                out.push(Outcome::Topology(topology));
            }
            Err(errs) => out.api_errors(errs),
        },
        _ => out.push(Outcome::Skip(kind.to_string())),
    }
}
