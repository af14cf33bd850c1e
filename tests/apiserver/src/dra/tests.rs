use serde_json::{Value, json};

use super::kubelet::node_selector_matches;
use super::*;

fn fields(c: Vec<Cause>) -> Vec<String> {
    c.into_iter().map(|c| c.field).collect()
}

fn claim(status: Value) -> Value {
    json!({"metadata": {"name": "c"},
        "spec": {"devices": {"requests": [{"name": "gpu", "firstAvailable": [{"name": "big", "deviceClassName": "x"}]}]}},
        "status": status})
}

fn alloc(device: &str, request: &str) -> Value {
    json!({"devices": {"results": [{"request": request, "driver": "d.example.com", "pool": "p", "device": device}]}})
}

#[test]
fn claim_status_rules_follow_kube_apiservers_validation() {
    let r = |uid: &str| json!({"resource": "pods", "name": uid, "uid": uid});
    let check = |new: Value, old: Value| {
        fields(causes(
            Builtin::ResourceClaim,
            &claim(new),
            Some(&claim(old)),
        ))
    };
    assert!(
        check(
            json!({"allocation": alloc("a", "gpu/big"), "reservedFor": [r("1")]}),
            json!({})
        )
        .is_empty()
    );
    assert_eq!(
        check(json!({"reservedFor": [r("1")]}), json!({})),
        ["status.reservedFor"]
    );
    assert_eq!(
        check(
            json!({"allocation": alloc("b", "gpu")}),
            json!({"allocation": alloc("a", "gpu")})
        ),
        ["status.allocation"]
    );
    assert!(check(json!({}), json!({"allocation": alloc("a", "gpu")})).is_empty());
    assert_eq!(
        check(
            json!({"allocation": alloc("a", "gpu"), "reservedFor": [r("1"), r("1")]}),
            json!({})
        ),
        ["status.reservedFor[1]"]
    );
    assert_eq!(
        check(
            json!({"allocation": alloc("a", "gpu"), "reservedFor": [{"resource": "pods"}]}),
            json!({})
        ),
        ["status.reservedFor[0].name", "status.reservedFor[0].uid"]
    );
    assert_eq!(
        check(json!({"allocation": alloc("a", "other")}), json!({})),
        ["status.allocation.devices.results[0].request"]
    );
    // Being deleted: reservations may go, not come.
    let mut deleting =
        claim(json!({"allocation": alloc("a", "gpu"), "reservedFor": [r("1"), r("2")]}));
    deleting["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    let old = claim(json!({"allocation": alloc("a", "gpu"), "reservedFor": [r("1")]}));
    assert_eq!(
        fields(causes(Builtin::ResourceClaim, &deleting, Some(&old))),
        ["status.reservedFor"]
    );
    // The spec never changes.
    let mut changed = claim(json!({}));
    changed["spec"]["devices"]["requests"][0]["name"] = json!("tpu");
    assert_eq!(
        fields(causes(
            Builtin::ResourceClaim,
            &changed,
            Some(&claim(json!({})))
        )),
        ["spec"]
    );
}

#[test]
fn claim_specs_and_slices_are_validated_on_create() {
    let spec = |req: Value| json!({"spec": {"devices": {"requests": [req]}}});
    assert_eq!(
        fields(causes(
            Builtin::ResourceClaim,
            &spec(json!({"name": "a", "exactly": {}})),
            None
        )),
        ["spec.devices.requests[0].exactly.deviceClassName"]
    );
    assert_eq!(
        fields(causes(
            Builtin::ResourceClaim,
            &spec(json!({"name": "a"})),
            None
        )),
        ["spec.devices.requests[0]"]
    );
    let slice = |extra: Value| {
        let mut s =
            json!({"spec": {"driver": "d", "pool": {"name": "p", "resourceSliceCount": 1}}});
        for (k, v) in extra.as_object().into_iter().flatten() {
            s["spec"][k] = v.clone();
        }
        s
    };
    assert!(
        causes(
            Builtin::ResourceSlice,
            &slice(json!({"nodeName": "n"})),
            None
        )
        .is_empty()
    );
    assert_eq!(
        fields(causes(Builtin::ResourceSlice, &slice(json!({})), None)),
        ["spec"]
    );
    assert_eq!(
        fields(causes(
            Builtin::ResourceSlice,
            &slice(json!({"nodeName": "n", "allNodes": true})),
            None
        )),
        ["spec"]
    );
    let old = slice(json!({"nodeName": "n"}));
    assert_eq!(
        fields(causes(
            Builtin::ResourceSlice,
            &slice(json!({"nodeName": "m"})),
            Some(&old)
        )),
        ["spec.nodeName"]
    );
}

#[test]
fn node_selectors_match_fields_and_labels() {
    let node = json!({"metadata": {"name": "a", "labels": {"zone": "z1", "gpus": "8"}}});
    let sel = |term: Value| json!({"nodeSelectorTerms": [term]});
    let field = |op: &str, v: &str| {
        sel(json!({"matchFields": [{"key": "metadata.name", "operator": op, "values": [v]}]}))
    };
    assert!(node_selector_matches(&field("In", "a"), &node));
    assert!(!node_selector_matches(&field("In", "b"), &node));
    assert!(node_selector_matches(&field("NotIn", "b"), &node));
    let label = |op: &str, vals: Value| {
        sel(json!({"matchExpressions": [{"key": "gpus", "operator": op, "values": vals}]}))
    };
    assert!(node_selector_matches(&label("Gt", json!(["4"])), &node));
    assert!(!node_selector_matches(&label("Lt", json!(["4"])), &node));
    assert!(node_selector_matches(&label("Exists", json!([])), &node));
    assert!(
        !node_selector_matches(&sel(json!({})), &node),
        "an empty term selects nothing"
    );
}

#[test]
fn claim_states_read_as_kubectl_prints_them() {
    let mut c = json!({"metadata": {}, "status": {}});
    assert_eq!(claim_state(&c), "pending");
    c["status"]["allocation"] = json!({});
    assert_eq!(claim_state(&c), "allocated");
    c["status"]["reservedFor"] = json!([{"uid": "1"}]);
    assert_eq!(claim_state(&c), "allocated,reserved");
    c["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    assert_eq!(claim_state(&c), "deleted,allocated,reserved");
}
