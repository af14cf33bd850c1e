//! Routing of `/api` and `/apis` paths to discovery and to resource handlers:
//! get, list (selectors, pagination, resourceVersion semantics), watch, create,
//! update, patch, delete, delete-collection and the pod subresources.

use std::sync::Arc;

use hyper::Method;
use serde_json::{Value, json};

use crate::Shared;
use crate::error::{ApiError, ApiResult, Cause};
use crate::http::{Reply, Req};
use crate::registry::{Builtin, ResourceDef};
use crate::selector::{FieldSelector, LabelSelector};
use crate::state::{State, WriteOpts};
use crate::table::{IncludeObject, to_table};

/// A resource request's target.
#[derive(Debug, Clone)]
pub struct Target {
    /// The resource.
    pub def: ResourceDef,
    /// The version asked for.
    pub version: String,
    /// Namespace, for namespaced requests.
    pub ns: Option<String>,
    /// Object name, for item requests.
    pub name: Option<String>,
    /// Subresource.
    pub sub: Option<String>,
}

/// How the client wants objects rendered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// Plain JSON objects.
    Json,
    /// `meta.k8s.io/v1` Table.
    Table(IncludeObject),
    /// `PartialObjectMetadata`.
    Meta,
}

/// Reads the Accept header.
pub fn output(r: &Req) -> ApiResult<Output> {
    let a = r.accept.as_str();
    if a.contains("as=Table") {
        let inc = match r.q("includeObject") {
            Some("None") => IncludeObject::None,
            Some("Object") => IncludeObject::Object,
            _ => IncludeObject::Metadata,
        };
        return Ok(Output::Table(inc));
    }
    if a.contains("as=PartialObjectMetadata") {
        return Ok(Output::Meta);
    }
    if !a.is_empty() && !a.contains("json") && !a.contains("*/*") {
        return Err(ApiError::new(
            406,
            "NotAcceptable",
            format!(
                "only the following media types are accepted: application/json, application/yaml; got {a}"
            ),
        ));
    }
    Ok(Output::Json)
}

/// Routes one API request.
pub async fn route(shared: Arc<Shared>, r: Req) -> Reply {
    let segs: Vec<&str> = r.segs.iter().map(String::as_str).collect();
    let result = match segs.as_slice() {
        ["version"] => Ok(Reply::Json(200, crate::discovery::version())),
        ["healthz" | "livez" | "readyz"] => Ok(Reply::Json(200, json!("ok"))),
        ["openapi", rest @ ..] => crate::discovery::openapi(&shared.lock().registry, rest, &r)
            .map(|v| Reply::Json(200, v)),
        ["api"] | ["apis"] | ["apis", _] | ["api", "v1"] | ["apis", _, _] => {
            crate::discovery::discover(&shared.lock().registry, &segs).map(|v| Reply::Json(200, v))
        }
        ["api", "v1", rest @ ..] => resource(shared.clone(), "", "v1", rest, &r).await,
        ["apis", g, v, rest @ ..] => resource(shared.clone(), g, v, rest, &r).await,
        _ => Err(ApiError::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )),
    };
    result.unwrap_or_else(Reply::from)
}

fn target(shared: &Shared, group: &str, version: &str, rest: &[&str]) -> ApiResult<Target> {
    let st = shared.lock();
    let nf = || {
        ApiError::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
    };
    let find = |plural: &str| st.registry.find(group, version, plural).cloned();
    let s = |x: &&str| x.to_string();
    let t = match rest {
        ["namespaces", ns, plural, more @ ..] if find(plural).is_some_and(|d| d.namespaced) => {
            Target {
                def: find(plural).ok_or_else(nf)?,
                version: version.into(),
                ns: Some(ns.to_string()),
                name: more.first().map(s),
                sub: more.get(1).map(s),
            }
        }
        [plural, more @ ..] => {
            let def = find(plural).ok_or_else(nf)?;
            if def.namespaced && !more.is_empty() {
                return Err(nf());
            }
            Target {
                def,
                version: version.into(),
                ns: None,
                name: more.first().map(s),
                sub: more.get(1).map(s),
            }
        }
        [] => return Err(nf()),
    };
    if let Some(sub) = &t.sub {
        let ok = (sub == "status" && t.def.has_status(version))
            || t.def.extra_subresources().contains(&sub.as_str());
        if !ok {
            return Err(nf());
        }
    }
    Ok(t)
}

async fn resource(
    shared: Arc<Shared>,
    group: &str,
    version: &str,
    rest: &[&str],
    r: &Req,
) -> ApiResult<Reply> {
    let t = target(&shared, group, version, rest)?;
    let out = output(r)?;
    let opts = WriteOpts {
        strict: r.q("fieldValidation") == Some("Strict"),
    };
    if r.q("dryRun").is_some_and(|d| !d.is_empty()) && r.method != Method::GET {
        return Err(ApiError::bad_request(
            "dryRun is not supported by the test API server",
        ));
    }
    let ns = t.ns.clone().unwrap_or_default();
    let render = |st: &State, v: Value| render_one(st, &t, v, out);
    match (&r.method, &t.name, &t.sub) {
        (&Method::GET, None, _) if r.flag("watch") => {
            let lw = crate::watch::WatchParams::from_req(r, &t)?;
            crate::watch::start(shared.clone(), t.clone(), lw, out).map(Reply::Stream)
        }
        (&Method::GET, None, _) => {
            let mut st = shared.lock();
            if st.faults.force_410 > 0 {
                st.faults.force_410 -= 1;
                return Err(ApiError::expired(
                    "resourceVersion is too old (injected fault)",
                ));
            }
            list(&st, &t, r, out).map(|v| Reply::Json(200, v))
        }
        (&Method::GET, Some(name), _) => {
            let st = shared.lock();
            let obj = st
                .store
                .get(&t.def.key(), &ns, name)
                .cloned()
                .ok_or_else(|| ApiError::not_found(&t.def.group, &t.def.plural, name))?;
            Ok(Reply::Json(200, render(&st, obj)))
        }
        (&Method::POST, None, _) if t.def.builtin == Builtin::SelfSubjectAccessReview => {
            let body = crate::protobuf::ssar_body(r)?;
            let st = shared.lock();
            Ok(Reply::Json(
                201,
                crate::rbac::self_subject_access_review(&st, r.user.as_ref(), &body),
            ))
        }
        (&Method::POST, None, _) if t.def.builtin == Builtin::SubjectAccessReview => {
            let body = r.json()?;
            let st = shared.lock();
            Ok(Reply::Json(
                201,
                crate::rbac::subject_access_review(&st, &body)?,
            ))
        }
        (&Method::POST, None, _) if t.def.builtin == Builtin::TokenReview => {
            let body = r.json()?;
            let st = shared.lock();
            Ok(Reply::Json(201, crate::auth::token_review(&st, &body)?))
        }
        (_, _, _) if t.def.builtin.is_review() => Err(ApiError::method_not_allowed()),
        (&Method::POST, None, _) => {
            let body = r.json()?;
            let mut st = shared.lock();
            let created = st.create(&t.def, &t.version, t.ns.as_deref(), body, &opts)?;
            Ok(Reply::Json(201, render(&st, created)))
        }
        (&Method::POST, Some(name), Some(sub)) => {
            let body = r.json()?;
            let mut st = shared.lock();
            let v = match sub.as_str() {
                "binding" => crate::eviction::binding(&mut st, &t.def, &ns, name, &body)?,
                "eviction" => crate::eviction::evict(&mut st, &t.def, &ns, name, &body)?,
                "token" => crate::auth::token_request(&mut st, &ns, name, &body)?,
                _ => return Err(ApiError::method_not_allowed()),
            };
            Ok(Reply::Json(201, v))
        }
        (&Method::PUT, Some(name), sub) => {
            let body = r.json()?;
            let mut st = shared.lock();
            // A PUT's uid is a storage precondition (409), checked before
            // anything else, as kube-apiserver's `GuaranteedUpdate` does.
            if let Some(uid) = body["metadata"]["uid"].as_str().filter(|u| !u.is_empty())
                && let Some(old) = st.store.get(&t.def.key(), &ns, name)
                && old["metadata"]["uid"].as_str() != Some(uid)
            {
                let stored = old["metadata"]["uid"].as_str().unwrap_or("").to_string();
                return Err(ApiError::conflict(
                    &t.def.group,
                    &t.def.plural,
                    name,
                    &format!(
                        "Precondition failed: UID in precondition: {uid}, UID in object meta: {stored}"
                    ),
                ));
            }
            if sub.is_some() {
                binding_check(&st, &t, r, "update", name, &body)?;
            }
            let v = st.update(&t.def, &t.version, (&ns, name), body, sub.is_some(), &opts)?;
            Ok(Reply::Json(200, render(&st, v)))
        }
        (&Method::PATCH, Some(name), sub) => {
            let mut st = shared.lock();
            let (v, code) = patch(&mut st, &t, name, sub.is_some(), r, &opts)?;
            Ok(Reply::Json(code, render(&st, v)))
        }
        (&Method::DELETE, Some(name), None) => {
            let body = r.json()?;
            let grace = r
                .q("gracePeriodSeconds")
                .and_then(|g| g.parse().ok())
                .or(body["gracePeriodSeconds"].as_i64());
            let mut st = shared.lock();
            let v = st.delete(
                &t.def,
                &ns,
                name,
                grace,
                body["preconditions"]["uid"].as_str(),
                body["preconditions"]["resourceVersion"].as_str(),
            )?;
            Ok(Reply::Json(200, render(&st, v)))
        }
        (&Method::DELETE, None, None) => {
            let body = r.json()?;
            let grace = r
                .q("gracePeriodSeconds")
                .and_then(|g| g.parse().ok())
                .or(body["gracePeriodSeconds"].as_i64());
            let mut st = shared.lock();
            let (label, field) = selectors(&t, r)?;
            let victims: Vec<Value> = st
                .store
                .list(&t.def.key(), t.ns.as_deref())
                .into_iter()
                .filter(|o| label.matches(o) && field.matches(o))
                .collect();
            let mut items = Vec::new();
            for v in victims {
                let (vns, vname) = crate::store::obj_key(&v);
                items.push(State::present(
                    &t.def,
                    &t.version,
                    st.delete(&t.def, &vns, &vname, grace, None, None)?,
                ));
            }
            let rv = st.store.rv().to_string();
            Ok(Reply::Json(
                200,
                json!({"kind": t.def.list_kind, "apiVersion": t.def.api_version(&t.version), "metadata": {"resourceVersion": rv}, "items": items}),
            ))
        }
        _ => Err(ApiError::method_not_allowed()),
    }
}

fn render_one(st: &State, t: &Target, v: Value, out: Output) -> Value {
    if v["kind"] == "Status" {
        return v;
    }
    let v = State::present(&t.def, &t.version, v);
    match out {
        Output::Json => v,
        Output::Meta => {
            json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": v["metadata"]})
        }
        Output::Table(inc) => {
            let rv = v["metadata"]["resourceVersion"]
                .as_str()
                .unwrap_or("")
                .to_string();
            to_table(&t.def, &t.version, &[v], &rv, None, inc, st.now())
        }
    }
}

/// Parses `labelSelector` and `fieldSelector`.
pub fn selectors(t: &Target, r: &Req) -> ApiResult<(LabelSelector, FieldSelector)> {
    let label = LabelSelector::parse(r.q("labelSelector").unwrap_or(""))?;
    let mut field =
        FieldSelector::parse(r.q("fieldSelector").unwrap_or(""), &t.def.field_labels())?;
    for (path, _, _) in &mut field.0 {
        *path = t.def.field_path(path);
    }
    Ok((label, field))
}

fn encode_continue(rv: u64, ns: &str, name: &str) -> String {
    format!("{rv}/{ns}/{name}")
        .bytes()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn decode_continue(s: &str) -> Option<(u64, String, String)> {
    let bytes: Option<Vec<u8>> = (0..s.len())
        .step_by(2)
        .map(|i| s.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()))
        .collect();
    let text = String::from_utf8(bytes?).ok()?;
    let mut it = text.splitn(3, '/');
    Some((
        it.next()?.parse().ok()?,
        it.next()?.to_string(),
        it.next()?.to_string(),
    ))
}

fn too_large(asked: u64, current: u64) -> ApiError {
    let mut e = ApiError::new(
        504,
        "Timeout",
        format!("Too large resource version: {asked}, current: {current}"),
    );
    e.causes.push(Cause {
        reason: "ResourceVersionTooLarge".into(),
        message: "Too large resource version".into(),
        field: String::new(),
    });
    e.retry_after = Some(1);
    e
}

fn list(st: &State, t: &Target, r: &Req, out: Output) -> ApiResult<Value> {
    let key = t.def.key();
    let (label, field) = selectors(t, r)?;
    let limit: usize = r.q("limit").and_then(|l| l.parse().ok()).unwrap_or(0);
    let current = st.store.rv();
    let ns = t.ns.as_deref();
    // `resourceVersion=0` (what client-go's reflectors send first) without
    // a continue token is answered from kube-apiserver's watch cache, which
    // ignores `limit`: the whole list in one page.
    let from_cache = r.q("continue").is_none_or(str::is_empty)
        && r.q("resourceVersion") == Some("0")
        && r.q("resourceVersionMatch")
            .is_none_or(|m| m.is_empty() || m == "NotOlderThan");
    let limit = if from_cache { 0 } else { limit };
    // By reference: only the page's objects are copied.
    let (at, items) = if let Some(c) = r.q("continue").filter(|c| !c.is_empty()) {
        let (rv, cns, cname) =
            decode_continue(c).ok_or_else(|| ApiError::bad_request("continue key is not valid"))?;
        let items = st
            .store
            .list_refs(&key, ns, Some(rv), Some(&(cns, cname)))
            .map_err(|_| {
            ApiError::expired("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.")
        })?;
        (rv, items)
    } else {
        let asked: Option<u64> = match r.q("resourceVersion").filter(|s| !s.is_empty()) {
            Some(s) => Some(
                s.parse()
                    .map_err(|_| ApiError::bad_request(format!("invalid resource version: {s}")))?,
            ),
            None => None,
        };
        match (asked, r.q("resourceVersionMatch").filter(|s| !s.is_empty())) {
            (None, Some(m)) => {
                return Err(ApiError::bad_request(format!(
                    "resourceVersionMatch: Forbidden: resourceVersionMatch \"{m}\" is forbidden unless resourceVersion is provided"
                )));
            }
            (Some(0), Some("Exact")) => {
                return Err(ApiError::invalid(
                    "ListOptions.meta.k8s.io",
                    "meta.k8s.io",
                    "",
                    vec![Cause {
                        reason: "FieldValueForbidden".into(),
                        message: "Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"".into(),
                        field: "resourceVersionMatch".into(),
                    }],
                ));
            }
            (Some(x), Some("Exact")) => {
                if x > current {
                    return Err(too_large(x, current));
                }
                (x, st.store.list_refs(&key, ns, Some(x), None)?)
            }
            (Some(x), Some("NotOlderThan") | None) => {
                if x > current {
                    return Err(too_large(x, current));
                }
                (current, st.store.list_refs(&key, ns, None, None)?)
            }
            (Some(_), Some(m)) => {
                return Err(ApiError::bad_request(format!(
                    "resourceVersionMatch: Unsupported value: \"{m}\""
                )));
            }
            (None, None) => (current, st.store.list_refs(&key, ns, None, None)?),
        }
    };
    let filtered: Vec<&Value> = items
        .into_iter()
        .filter(|o| label.matches(o) && field.matches(o))
        .collect();
    let total = filtered.len();
    let take = if limit == 0 { total } else { limit.min(total) };
    let page: Vec<Value> = filtered
        .into_iter()
        .take(take)
        .map(|o| State::present(&t.def, &t.version, o.clone()))
        .collect();
    let cont = if take < total {
        page.last().map(|o| {
            let (a, b) = crate::store::obj_key(o);
            encode_continue(at, &a, &b)
        })
    } else {
        None
    };
    let rv = at.to_string();
    Ok(match out {
        Output::Table(inc) => to_table(
            &t.def,
            &t.version,
            &page,
            &rv,
            cont.as_deref(),
            inc,
            st.now(),
        ),
        Output::Meta => {
            let items: Vec<Value> = page.iter().map(|o| json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": o["metadata"]})).collect();
            json!({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "metadata": list_meta(&rv, cont.as_deref(), total - take), "items": items})
        }
        Output::Json => {
            json!({"kind": t.def.list_kind, "apiVersion": t.def.api_version(&t.version), "metadata": list_meta(&rv, cont.as_deref(), total - take), "items": page})
        }
    })
}

fn list_meta(rv: &str, cont: Option<&str>, remaining: usize) -> Value {
    let mut md = json!({"resourceVersion": rv});
    if let Some(c) = cont {
        md["continue"] = json!(c);
        md["remainingItemCount"] = json!(remaining);
    }
    md
}

fn patch(
    st: &mut State,
    t: &Target,
    name: &str,
    status: bool,
    r: &Req,
    opts: &WriteOpts,
) -> ApiResult<(Value, u16)> {
    let ns = t.ns.clone().unwrap_or_default();
    let ct = r
        .content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_string();
    let body = r.json()?;
    let current = st.store.get(&t.def.key(), &ns, name).cloned();
    let Some(cur) = current else {
        if ct == "application/apply-patch+yaml" && !status {
            let mut obj = body;
            obj["metadata"]["name"] = json!(name);
            return Ok((
                st.create(&t.def, &t.version, t.ns.as_deref(), obj, opts)?,
                201,
            ));
        }
        return Err(ApiError::not_found(&t.def.group, &t.def.plural, name));
    };
    let mut obj = State::present(&t.def, &t.version, cur);
    match ct.as_str() {
        "application/merge-patch+json" | "application/apply-patch+yaml" => {
            crate::patch::merge_patch(&mut obj, &body)
        }
        "application/strategic-merge-patch+json" => {
            if t.def.builtin == Builtin::Custom {
                return Err(ApiError::unsupported_media(&ct));
            }
            crate::patch::strategic_merge(&mut obj, &body)?
        }
        "application/json-patch+json" => crate::patch::json_patch(&mut obj, &body)?,
        other => return Err(ApiError::unsupported_media(other)),
    }
    if ct == "application/apply-patch+yaml" && r.q("fieldManager").is_none_or(str::is_empty) {
        return Err(ApiError::bad_request(
            "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
        ));
    }
    if status {
        binding_check(st, t, r, "patch", name, &obj)?;
    }
    Ok((
        st.update(&t.def, &t.version, (&ns, name), obj, status, opts)?,
        200,
    ))
}

/// The `resourceclaims/binding` authorization of a ResourceClaim status
/// write (see [`crate::dra::authorize_binding`]), after the resourceVersion
/// precondition: a stale write gets its 409 from the update.
fn binding_check(
    st: &State,
    t: &Target,
    r: &Req,
    verb: &str,
    name: &str,
    obj: &Value,
) -> ApiResult<()> {
    if t.def.builtin != Builtin::ResourceClaim {
        return Ok(());
    }
    let ns = t.ns.as_deref().unwrap_or_default();
    let stale = obj["metadata"]["resourceVersion"]
        .as_str()
        .filter(|v| !v.is_empty())
        .is_some_and(|v| {
            st.store
                .get(&t.def.key(), ns, name)
                .map(|o| &o["metadata"]["resourceVersion"])
                != Some(&json!(v))
        });
    if stale {
        return Ok(());
    }
    crate::dra::authorize_binding(st, r.user.as_ref(), verb, (ns, name), &obj["status"])
}
