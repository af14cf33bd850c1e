//! Discovery (`/version`, `/api`, `/apis`, group and resource lists) and the
//! OpenAPI v3 documents kubectl reads to learn that the server validates fields.

use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult};
use crate::http::Req;
use crate::registry::Registry;

/// kube's version priority: GA above beta above alpha, a higher number
/// first within each (`v2` > `v1` > `v1beta2` > `v1beta1` > `v1alpha2`).
pub fn version_priority(v: &str) -> (u8, u64, u64) {
    let Some(rest) = v.strip_prefix('v') else {
        return (0, 0, 0);
    };
    let digits = rest.chars().take_while(char::is_ascii_digit).count();
    let (major, tail) = rest.split_at(digits);
    let Ok(major) = major.parse::<u64>() else {
        return (0, 0, 0);
    };
    let (level, minor) = match tail {
        "" => (3, "0"),
        t if t.starts_with("beta") => (2, &t[4..]),
        t if t.starts_with("alpha") => (1, &t[5..]),
        _ => return (0, 0, 0),
    };
    match minor.parse::<u64>() {
        Ok(m) => (level, major, m),
        Err(_) => (0, 0, 0),
    }
}

/// `/version`.
pub fn version() -> Value {
    json!({"major": "1", "minor": "35", "gitVersion": "v1.35.0-trainyard-testapi", "gitCommit": "0000000000000000000000000000000000000000",
           "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.25", "compiler": "gc", "platform": "linux/amd64"})
}

fn resource_list(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let mut out = Vec::new();
    for d in reg
        .all()
        .filter(|d| d.group == group && d.version(version).is_some())
    {
        let mut r = json!({"name": d.plural, "singularName": d.singular, "namespaced": d.namespaced, "kind": d.kind, "verbs": d.verbs()});
        if !d.short_names.is_empty() {
            r["shortNames"] = json!(d.short_names);
        }
        if !d.categories.is_empty() {
            r["categories"] = json!(d.categories);
        }
        out.push(r);
        if d.has_status(version) {
            out.push(json!({"name": format!("{}/status", d.plural), "singularName": "", "namespaced": d.namespaced, "kind": d.kind, "verbs": ["get", "patch", "update"]}));
        }
        for sub in d.extra_subresources() {
            let mut r = json!({"name": format!("{}/{sub}", d.plural), "singularName": "", "namespaced": d.namespaced, "verbs": ["create"]});
            match *sub {
                "binding" => r["kind"] = json!("Binding"),
                "portforward" => {
                    r["kind"] = json!("PodPortForwardOptions");
                    r["verbs"] = json!(["create", "get"]);
                }
                "token" => {
                    r["kind"] = json!("TokenRequest");
                    r["group"] = json!("authentication.k8s.io");
                    r["version"] = json!("v1");
                }
                _ => {
                    r["kind"] = json!("Eviction");
                    r["group"] = json!("policy");
                    r["version"] = json!("v1");
                }
            }
            out.push(r);
        }
    }
    if out.is_empty() {
        return None;
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": out}),
    )
}

fn group_json(name: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
        .collect();
    json!({"name": name, "versions": vs, "preferredVersion": vs.first().cloned().unwrap_or(Value::Null)})
}

/// The legacy (unaggregated) discovery documents.
pub fn discover(reg: &Registry, segs: &[&str]) -> ApiResult<Value> {
    let nf = || {
        ApiError::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
    };
    match segs {
        ["api"] => Ok(
            json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]}),
        ),
        ["api", "v1"] => resource_list(reg, "", "v1").ok_or_else(nf),
        ["apis"] => {
            let groups: Vec<Value> = reg
                .groups()
                .iter()
                .filter(|(g, _)| !g.is_empty())
                .map(|(g, vs)| group_json(g, vs))
                .collect();
            Ok(json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}))
        }
        ["apis", g] => {
            let groups = reg.groups();
            let vs = groups.get(*g).filter(|_| !g.is_empty()).ok_or_else(nf)?;
            let mut v = group_json(g, vs);
            v["kind"] = json!("APIGroup");
            v["apiVersion"] = json!("v1");
            Ok(v)
        }
        ["apis", g, v] => resource_list(reg, g, v).ok_or_else(nf),
        _ => Err(nf()),
    }
}

/// `/openapi/v3` (the index) and `/openapi/v3/{api/v1|apis/g/v}` (per group-version
/// documents). The documents list each resource's item path with its operations,
/// the `x-kubernetes-group-version-kind` extension and the `fieldValidation` query
/// parameter, which is what kubectl reads to leave field validation to the server.
/// They carry no component schemas, so `kubectl explain` has nothing to show and
/// `kubectl apply` computes strategic merge patches from its compiled-in types
/// (merge patches for custom resources). `/openapi/v2` is not served.
pub fn openapi(reg: &Registry, rest: &[&str], _r: &Req) -> ApiResult<Value> {
    let nf = || {
        ApiError::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
    };
    match rest {
        ["v3"] => {
            let mut paths = serde_json::Map::new();
            for (g, vs) in reg.groups() {
                for v in vs {
                    let key = if g.is_empty() {
                        format!("api/{v}")
                    } else {
                        format!("apis/{g}/{v}")
                    };
                    let hash = format!("{:016X}", fnv(&gv_doc(reg, &g, &v).to_string()));
                    paths.insert(
                        key.clone(),
                        json!({"serverRelativeURL": format!("/openapi/v3/{key}?hash={hash}")}),
                    );
                }
            }
            Ok(json!({"paths": paths}))
        }
        ["v3", "api", v] => Some(gv_doc(reg, "", v))
            .filter(|d| !d["paths"].as_object().is_none_or(|m| m.is_empty()))
            .ok_or_else(nf),
        ["v3", "apis", g, v] => Some(gv_doc(reg, g, v))
            .filter(|d| !d["paths"].as_object().is_none_or(|m| m.is_empty()))
            .ok_or_else(nf),
        _ => Err(nf()),
    }
}

fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf29ce484222325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100000001b3)
    })
}

fn gv_doc(reg: &Registry, group: &str, version: &str) -> Value {
    let prefix = if group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{group}/{version}")
    };
    let mut paths = serde_json::Map::new();
    for d in reg
        .all()
        .filter(|d| d.group == group && d.version(version).is_some())
    {
        let gvk = json!({"group": d.group, "version": version, "kind": d.kind});
        let params = json!([
            {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
            {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
            {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
        ]);
        let op = |verb: &str| json!({"operationId": format!("{verb}{}", d.kind), "x-kubernetes-action": verb, "x-kubernetes-group-version-kind": gvk, "parameters": params, "responses": {"200": {"description": "OK"}}});
        let item = if d.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}/{{name}}", d.plural)
        } else {
            format!("{prefix}/{}/{{name}}", d.plural)
        };
        paths.insert(item, json!({"get": op("get"), "put": op("put"), "patch": op("patch"), "delete": op("delete")}));
        let coll = if d.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}", d.plural)
        } else {
            format!("{prefix}/{}", d.plural)
        };
        paths.insert(coll, json!({"get": op("list"), "post": op("post")}));
    }
    json!({"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "v1.35.0"}, "paths": paths, "components": {"schemas": {}}})
}
