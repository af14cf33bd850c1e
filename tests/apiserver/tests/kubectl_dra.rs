//! kubectl against the `resource.k8s.io` kinds: `kubectl create -f` of a
//! class, a slice, a claim, a template and a pod using it; `kubectl get` of
//! each kind with kube-apiserver's columns; the claim the controller generates
//! for the pod; a status written with `kubectl patch --subresource=status`
//! and a refused change of an allocation. The kube-rs view is in `dra.rs`.

mod common;

use common::{Kubectl, fixture, kubectl_or_skip, manual_server};

fn header(table: &str) -> Vec<&str> {
    table
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect()
}

fn row<'a>(table: &'a str, name: &str) -> Vec<&'a str> {
    table
        .lines()
        .find(|l| l.starts_with(name))
        .unwrap_or_default()
        .split_whitespace()
        .collect()
}

const ALLOCATION: &str = r#"{"status": {"allocation": {"devices": {"results": [{"request": "gpu", "driver": "gpu.example.com", "pool": "node-a", "device": "DEVICE"}]}, "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-a"]}]}]}}}}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_gets_resourceclaims_resourceslices_and_deviceclasses() {
    let Some(bin) = kubectl_or_skip("kubectl_gets_resourceclaims_resourceslices_and_deviceclasses")
    else {
        return;
    };
    let server = manual_server().await;
    let k = Kubectl::new(bin, &server, "dra");
    let out = k
        .ok(&["create", "-f", &fixture("dra.yaml").display().to_string()])
        .await;
    for made in [
        "deviceclass.resource.k8s.io/gpu.example.com created",
        "resourceslice.resource.k8s.io/node-a-gpu.example.com created",
        "resourceclaim.resource.k8s.io/shared created",
        "resourceclaimtemplate.resource.k8s.io/one-gpu created",
        "pod/trainer created",
    ] {
        assert!(out.contains(made), "{made}: {out}");
    }
    let apis = k
        .ok(&["api-resources", "--api-group=resource.k8s.io", "-o", "name"])
        .await;
    for r in [
        "deviceclasses.resource.k8s.io",
        "resourceclaims.resource.k8s.io",
        "resourceclaimtemplates.resource.k8s.io",
        "resourceslices.resource.k8s.io",
        "devicetaintrules.resource.k8s.io",
    ] {
        assert!(apis.lines().any(|l| l == r), "{r}: {apis}");
    }

    let slices = k.ok(&["get", "resourceslices"]).await;
    assert_eq!(
        header(&slices),
        ["NAME", "NODE", "DRIVER", "POOL", "AGE"],
        "{slices}"
    );
    assert_eq!(
        row(&slices, "node-a-gpu.example.com")[..4],
        [
            "node-a-gpu.example.com",
            "node-a",
            "gpu.example.com",
            "node-a"
        ],
        "{slices}"
    );
    let classes = k.ok(&["get", "deviceclasses"]).await;
    assert_eq!(header(&classes), ["NAME", "AGE"], "{classes}");
    assert_eq!(row(&classes, "gpu.example.com")[0], "gpu.example.com");
    let templates = k.ok(&["get", "resourceclaimtemplates"]).await;
    assert_eq!(row(&templates, "one-gpu")[0], "one-gpu", "{templates}");

    // The controller (run with the kubelet step) makes the pod's claim.
    server.tick();
    let claims = k.ok(&["get", "resourceclaims"]).await;
    assert_eq!(header(&claims), ["NAME", "STATE", "AGE"], "{claims}");
    assert_eq!(
        row(&claims, "shared")[..2],
        ["shared", "pending"],
        "{claims}"
    );
    let generated = row(&claims, "trainer-gpu-");
    assert_eq!(generated.get(1), Some(&"pending"), "{claims}");
    let recorded = k
        .ok(&[
            "get",
            "pod",
            "trainer",
            "-o",
            "jsonpath={.status.resourceClaimStatuses[0].resourceClaimName}",
        ])
        .await;
    assert_eq!(recorded, generated[0]);

    // The status through the status subresource; then the allocation is fixed.
    let patched = k
        .ok(&[
            "patch",
            "resourceclaim",
            "shared",
            "--subresource=status",
            "--type=merge",
            "-p",
            &ALLOCATION.replace("DEVICE", "gpu-0"),
        ])
        .await;
    assert!(
        patched.contains("resourceclaim.resource.k8s.io/shared patched"),
        "{patched}"
    );
    let claims = k.ok(&["get", "resourceclaims"]).await;
    assert_eq!(row(&claims, "shared")[1], "allocated", "{claims}");
    let refused = k
        .run(&[
            "patch",
            "resourceclaim",
            "shared",
            "--subresource=status",
            "--type=merge",
            "-p",
            &ALLOCATION.replace("DEVICE", "gpu-1"),
        ])
        .await;
    assert!(!refused.ok, "{refused:?}");
    assert!(
        refused.stderr.contains("status.allocation")
            && refused.stderr.contains("field is immutable"),
        "{}",
        refused.stderr
    );
    // A status in a main-resource patch is ignored.
    k.ok(&[
        "patch",
        "resourceclaim",
        "shared",
        "--type=merge",
        "-p",
        r#"{"metadata": {"labels": {"a": "b"}}, "status": {"allocation": null}}"#,
    ])
    .await;
    let claims = k.ok(&["get", "resourceclaims", "-l", "a=b"]).await;
    assert_eq!(row(&claims, "shared")[1], "allocated", "{claims}");
}
