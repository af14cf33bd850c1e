//! The chart's RBAC against what the service calls and what the docs say.

use super::*;

/// (API group, resource) -> verbs, over the rules of `role`.
fn grants(role: &Value) -> BTreeMap<(String, String), BTreeSet<String>> {
    let mut out: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for rule in role["rules"].as_array().expect("rules") {
        for g in strings(&rule["apiGroups"]) {
            for r in strings(&rule["resources"]) {
                out.entry((g.clone(), r))
                    .or_default()
                    .extend(strings(&rule["verbs"]));
            }
        }
    }
    out
}

/// The resource (plural) of a kind, as the API names it.
fn plural(kind: &str) -> String {
    let lower = kind.to_lowercase();
    if let Some(stem) = lower.strip_suffix('y') {
        format!("{stem}ies")
    } else if lower.ends_with('s') {
        format!("{lower}es")
    } else {
        format!("{lower}s")
    }
}

/// An API group as people write it ("core" for the empty one).
fn group_name(g: &str) -> &str {
    if g.is_empty() { "core" } else { g }
}

/// The kinds `crates/serve/src/watch.rs` watches: (group, kind).
fn watched_kinds() -> Vec<(String, String)> {
    let src = read(&root().join("crates/serve/src/watch.rs"));
    let start = src
        .find("pub const KINDS")
        .expect("watch.rs declares KINDS");
    let end = start + src[start..].find("];").expect("the end of KINDS");
    let re = Regex::new(r#"\(\s*"([^"]*)"\s*,\s*"([^"]*)"\s*,\s*"([^"]*)"\s*\)"#).expect("regex");
    let kinds: Vec<(String, String)> = re
        .captures_iter(&src[start..end])
        .map(|c| (c[1].to_string(), c[3].to_string()))
        .collect();
    assert!(kinds.len() >= 10, "watch.rs KINDS parsed as {kinds:?}");
    kinds
}

/// The owner kinds `crates/serve/src/infer.rs` infers PodGroups from:
/// (group, kind), from its `Workload::of` table.
fn workload_kinds() -> Vec<(String, String)> {
    let src = read(&root().join("crates/serve/src/infer.rs"));
    let re = Regex::new(r#"\(\s*"([^"]*)"\s*,\s*"([^"]*)"\s*\)\s*=>\s*Workload::"#).expect("regex");
    let kinds: Vec<(String, String)> = re
        .captures_iter(&src)
        .map(|c| (c[1].to_string(), c[2].to_string()))
        .collect();
    assert!(
        kinds.len() >= 5,
        "infer.rs Workload::of parsed as {kinds:?}"
    );
    kinds
}

#[test]
fn rbac_grants_nothing_with_a_wildcard() {
    let objects = manifest_objects();
    let roles: Vec<&Value> = objects
        .iter()
        .filter(|o| matches!(kind(o), "ClusterRole" | "Role"))
        .collect();
    assert_eq!(roles.len(), 2, "one ClusterRole and one Role");
    for role in roles {
        for rule in role["rules"].as_array().expect("rules") {
            for field in [
                "apiGroups",
                "resources",
                "verbs",
                "resourceNames",
                "nonResourceURLs",
            ] {
                assert!(
                    !strings(&rule[field]).iter().any(|s| s.contains('*')),
                    "{} {}: {field} has a wildcard: {rule}",
                    kind(role),
                    name(role)
                );
            }
        }
    }
    // Nothing the service never does: it updates nothing cluster-wide,
    // deletes nothing but the ResourceClaims it created for DRA-backed
    // extended resources (when their pods are not bound, as kube-scheduler
    // deletes them), and reads no Secrets or ConfigMaps (its config is a
    // mounted file).
    let cluster = grants(one_of(&objects, "ClusterRole"));
    let allowed: BTreeSet<&str> = ["get", "list", "watch", "create", "patch"].into();
    for ((g, r), verbs) in &cluster {
        for v in verbs {
            let claim_delete = v == "delete" && g == "resource.k8s.io" && r == "resourceclaims";
            // Kubernetes' PodGroup status: the verbs kube-scheduler's own
            // role has (the service patches; update is granted as there).
            let group_status = v == "update" && g == "scheduling.k8s.io" && r == "podgroups/status";
            assert!(
                allowed.contains(v.as_str()) || claim_delete || group_status,
                "ClusterRole grants {v} on {}/{r}",
                group_name(g)
            );
        }
        assert!(
            !matches!(r.as_str(), "secrets" | "configmaps"),
            "ClusterRole grants {r}"
        );
    }
}

#[test]
fn rbac_covers_what_the_service_calls() {
    let objects = manifest_objects();
    let cluster = grants(one_of(&objects, "ClusterRole"));
    let has = |g: &str, r: &str, verbs: &[&str]| -> bool {
        cluster
            .get(&(g.to_string(), r.to_string()))
            .is_some_and(|v| verbs.iter().all(|verb| v.contains(*verb)))
    };
    let mut missing = Vec::new();
    for (g, k) in watched_kinds() {
        if !has(&g, &plural(&k), &["list", "watch"]) {
            missing.push(format!(
                "list, watch on {}/{} (watch.rs KINDS {k})",
                group_name(&g),
                plural(&k)
            ));
        }
    }
    for (g, k) in workload_kinds() {
        if !has(&g, &plural(&k), &["get"]) {
            missing.push(format!(
                "get on {}/{} (an owner infer.rs groups by: {k})",
                group_name(&g),
                plural(&k)
            ));
        }
    }
    // The writes (crates/serve/src: write.rs, report.rs, grouper.rs,
    // admission.rs) and the other reads (grouper.rs: Namespaces, the
    // StatefulSet and leader pod of a LeaderWorkerSet).
    for (g, r, verbs) in [
        ("", "pods", &["get", "patch"][..]),
        ("", "pods/binding", &["create"]),
        ("", "pods/eviction", &["create"]),
        ("", "pods/status", &["patch"]),
        ("", "events", &["create"]),
        ("", "namespaces", &["list", "watch"]),
        ("apps", "statefulsets", &["get"]),
        ("trainyard.io", "podgroups", &["create"]),
        ("trainyard.io", "podgroups/status", &["patch"]),
        ("trainyard.io", "queues/status", &["patch"]),
        // Upstream gangs (watch.rs UPSTREAM_KINDS, in the version served;
        // upstream_status.rs writes the status of Trainyard's).
        ("scheduling.k8s.io", "workloads", &["get", "list", "watch"]),
        ("scheduling.k8s.io", "podgroups", &["get", "list", "watch"]),
        (
            "scheduling.k8s.io",
            "podgroups/status",
            &["update", "patch"],
        ),
        // DRA claims (claims.rs): the finalizer, then the allocation and
        // reservations, authorized on the synthetic binding subresource
        // too from Kubernetes 1.36; the claim of a pod's DRA-backed
        // extended resources created, and deleted when released
        // (extended.rs), its name recorded in the pod's status.
        (
            "resource.k8s.io",
            "resourceclaims",
            &["patch", "create", "delete"],
        ),
        ("resource.k8s.io", "resourceclaims/status", &["patch"]),
        ("resource.k8s.io", "resourceclaims/binding", &["patch"]),
    ] {
        if !has(g, r, verbs) {
            missing.push(format!("{} on {}/{r}", verbs.join(", "), group_name(g)));
        }
    }
    assert!(
        missing.is_empty(),
        "the ClusterRole (deploy/helm/trainyard/templates/rbac.yaml) lacks:\n  {}\nadd them, with the reason in docs/operations.md, then {REGENERATE}",
        missing.join("\n  ")
    );

    // Leases and the checkpoint ConfigMap: only in the release namespace,
    // beyond create only the configured ones by name.
    let role = one_of(&objects, "Role");
    let rules: Vec<&Value> = role["rules"].as_array().expect("rules").iter().collect();
    for rule in &rules {
        let (group, name) = match strings(&rule["resources"]).as_slice() {
            [r] if r == "leases" => ("coordination.k8s.io", "trainyard"),
            [r] if r == "configmaps" => ("", "trainyard-checkpoint"),
            other => panic!("the Role grants {other:?}: only leases and configmaps"),
        };
        assert_eq!(strings(&rule["apiGroups"]), [group]);
        let verbs = strings(&rule["verbs"]);
        if verbs != ["create"] {
            assert_eq!(
                strings(&rule["resourceNames"]),
                [name],
                "verbs {verbs:?} beyond create are for the one object"
            );
        }
    }
    let granted = grants(role);
    let verbs = &granted[&("coordination.k8s.io".to_string(), "leases".to_string())];
    for v in ["get", "create", "update"] {
        assert!(verbs.contains(v), "the Role lacks {v} on leases");
    }
    let verbs = &granted[&(String::new(), "configmaps".to_string())];
    for v in ["get", "create", "patch"] {
        assert!(
            verbs.contains(v),
            "the Role lacks {v} on configmaps (the checkpoint)"
        );
    }
    let config: Value = serde_saphyr::from_str(
        one_of(&objects, "ConfigMap")["data"]["config.yaml"]
            .as_str()
            .expect("config"),
    )
    .expect("config YAML");
    assert_eq!(
        config["service"]["leaderElection"]["leaseNamespace"],
        role["metadata"]["namespace"]
    );
}

/// The rows of the RBAC table in docs/operations.md:
/// `| kind | API group | resource | verbs | why |`.
fn documented_grants() -> BTreeMap<(String, String, String), BTreeSet<String>> {
    let doc = read(&root().join("docs/operations.md"));
    let start = doc.find("## RBAC").expect("docs/operations.md has ## RBAC");
    let section = &doc[start..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |i| i + 3)];
    let mut out = BTreeMap::new();
    for line in section.lines() {
        let cells: Vec<&str> = line
            .trim()
            .trim_matches('|')
            .split('|')
            .map(str::trim)
            .collect();
        if cells.len() != 5
            || !matches!(cells[0], "ClusterRole" | "Role")
            || !cells[2].starts_with('`')
        {
            continue;
        }
        let unquote = |s: &str| s.trim_matches('`').to_string();
        let group = match unquote(cells[1]).as_str() {
            "core" => String::new(),
            g => g.to_string(),
        };
        let verbs: BTreeSet<String> = cells[3].split(',').map(|v| unquote(v.trim())).collect();
        assert!(!cells[4].is_empty(), "{line}: no reason given");
        out.insert((cells[0].to_string(), group, unquote(cells[2])), verbs);
    }
    out
}

#[test]
fn rbac_table_in_the_docs_is_the_charts() {
    let objects = manifest_objects();
    let mut chart = BTreeMap::new();
    for k in ["ClusterRole", "Role"] {
        for ((g, r), verbs) in grants(one_of(&objects, k)) {
            chart.insert((k.to_string(), g, r), verbs);
        }
    }
    let docs = documented_grants();
    let fmt = |m: &BTreeMap<(String, String, String), BTreeSet<String>>| -> Vec<String> {
        m.iter()
            .map(|((k, g, r), v)| {
                let g = if g.is_empty() { "core" } else { g };
                format!(
                    "{k} {g} {r}: {}",
                    v.iter().cloned().collect::<Vec<_>>().join(", ")
                )
            })
            .collect()
    };
    assert_eq!(
        fmt(&docs),
        fmt(&chart),
        "docs/operations.md's RBAC table (left) and the chart's roles (right) differ"
    );
}
