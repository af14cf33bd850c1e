//! `pods/portforward` with real clients: kube-rs's `Api::<Pod>::portforward`
//! (WebSocket, `v4.channel.k8s.io`) to TCP servers listening on the pod's
//! `status.podIP`, a loopback address of this test's own; two ports at once,
//! a port nothing listens on (the error channel), the refusals (no such pod,
//! no node, not running), RBAC (`get` and, for the upgrade, `create` on
//! `pods/portforward`), and kubectl, which speaks SPDY and is refused.

mod common;

use common::{Kubectl, kubectl_or_skip, manual_server};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use trainyard_testapi::{ADMIN_TOKEN, Config, TestApiServer, UserInfo};

/// The pod IP of this file's pods: a loopback address no other test uses.
const POD_IP: &str = "127.0.0.7";

fn client(server: &TestApiServer, token: Option<&str>) -> Client {
    let mut config = kube::Config::new(server.url().parse().expect("url"));
    config.default_retry = false;
    config.auth_info.token = token.map(|t| t.to_string().into());
    Client::try_from(config).expect("client")
}

/// Pod `name` in `default`: on `node` (none: unscheduled), in `phase` with
/// `ip` (a node that does not exist: the simulated kubelet leaves it be).
async fn pod(pods: &Api<Pod>, name: &str, node: Option<&str>, phase: &str, ip: Option<&str>) {
    let mut spec = json!({"containers": [{"name": "c", "image": "echo:1"}]});
    if let Some(n) = node {
        spec["nodeName"] = json!(n);
    }
    let p: Pod =
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).expect("pod");
    pods.create(&PostParams::default(), &p).await.expect("pod");
    let mut status = json!({"phase": phase});
    if let Some(ip) = ip {
        status["podIP"] = json!(ip);
        status["podIPs"] = json!([{"ip": ip}]);
    }
    pods.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": status})),
    )
    .await
    .expect("pod status");
}

/// An echo server on the pod IP (what it reads it writes back, until EOF).
async fn echo() -> u16 {
    let l = TcpListener::bind((POD_IP, 0))
        .await
        .expect("bind the pod IP");
    let port = l.local_addr().expect("addr").port();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let (mut r, mut w) = s.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
        }
    });
    port
}

/// A server on the pod IP that says `hello` and closes.
async fn greeter() -> u16 {
    let l = TcpListener::bind((POD_IP, 0))
        .await
        .expect("bind the pod IP");
    let port = l.local_addr().expect("addr").port();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            let _ = s.write_all(b"hello").await;
        }
    });
    port
}

/// A port on the pod IP nothing listens on.
fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind((POD_IP, 0)).expect("bind the pod IP");
    l.local_addr().expect("addr").port()
}

fn api_error(e: kube::Error) -> (u16, String) {
    match e {
        kube::Error::Api(s) => (s.code, s.message),
        other => panic!("expected a Status, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_rs_forwards_two_ports_to_the_pod_ip() {
    let server = manual_server().await;
    let pods: Api<Pod> = Api::namespaced(client(&server, None), "default");
    pod(&pods, "echo", Some("node-a"), "Running", Some(POD_IP)).await;
    let (a, b) = (echo().await, greeter().await);

    let mut pf = pods
        .portforward("echo", &[a, b])
        .await
        .expect("port-forward");
    let mut sa = pf.take_stream(a).expect("stream a");
    let mut sb = pf.take_stream(b).expect("stream b");
    sa.write_all(b"ping through the API server")
        .await
        .expect("write");
    let mut got = vec![0u8; 27];
    sa.read_exact(&mut got).await.expect("read the echo");
    assert_eq!(got, b"ping through the API server");
    // The second port (channels 2 and 3): what the pod says. (Its end is
    // not seen until the WebSocket closes: v4 has no per-port close.)
    let mut hello = [0u8; 5];
    sb.read_exact(&mut hello).await.expect("read");
    assert_eq!(&hello, b"hello");
    // Bytes go both ways as long as the connection lasts.
    sa.write_all(b"again").await.expect("write");
    let mut again = [0u8; 5];
    sa.read_exact(&mut again).await.expect("read");
    assert_eq!(&again, b"again");
    drop(sa);
    drop(sb);
    pf.join().await.expect("the forwarder ends cleanly");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_rs_port_forward_errors() {
    let server = manual_server().await;
    let pods: Api<Pod> = Api::namespaced(client(&server, None), "default");

    // No such pod: kube-apiserver's 404.
    let e = api_error(pods.portforward("nope", &[80]).await.err().expect("404"));
    assert_eq!(e, (404, "pods \"nope\" not found".into()));

    // Not scheduled: kube-apiserver's 400.
    pod(&pods, "unscheduled", None, "Pending", None).await;
    let e = api_error(
        pods.portforward("unscheduled", &[80])
            .await
            .err()
            .expect("400"),
    );
    assert_eq!(
        e,
        (400, "pod unscheduled does not have a host assigned".into())
    );

    // Not running (where a real cluster's kubelet or runtime refuses).
    pod(&pods, "pending", Some("node-a"), "Pending", None).await;
    let e = api_error(pods.portforward("pending", &[80]).await.err().expect("400"));
    assert_eq!(
        e,
        (
            400,
            "pod pending is not running (status.phase Pending, no status.podIP); the test API server forwards only to a Running pod with a status.podIP".into()
        )
    );

    // Nothing listens at the port: the upgrade succeeds, the error comes
    // on the port's error channel as text (as from a kubelet).
    pod(&pods, "quiet", Some("node-a"), "Running", Some(POD_IP)).await;
    let port = closed_port();
    let mut pf = pods.portforward("quiet", &[port]).await.expect("upgraded");
    let err = pf
        .take_error(port)
        .expect("the error future")
        .await
        .expect("an error message");
    assert!(
        err.starts_with(&format!(
            "error forwarding port {port} to pod default/quiet, uid "
        )) && err.contains(&format!(
            "failed to connect to {POD_IP}:{port} (the pod's status.podIP): "
        )) && err.contains("refused"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn port_forward_needs_get_and_create_on_pods_portforward() {
    let server = TestApiServer::start(Config {
        manual_clock: true,
        rbac: true,
        tokens: vec![("forwarder".into(), UserInfo::new("forwarder", &[]))],
        ..Config::default()
    })
    .await
    .expect("server starts");
    let admin = client(&server, Some(ADMIN_TOKEN));
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "default");
    pod(&pods, "echo", Some("node-a"), "Running", Some(POD_IP)).await;
    let port = echo().await;
    let role = |verbs: &[&str]| -> ClusterRole {
        serde_json::from_value(json!({
            "metadata": {"name": "forward"},
            "rules": [{"apiGroups": [""], "resources": ["pods/portforward"], "verbs": verbs}]
        }))
        .expect("role")
    };
    let roles: Api<ClusterRole> = Api::all(admin.clone());
    roles
        .create(&PostParams::default(), &role(&["get"]))
        .await
        .expect("role");
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "forward"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "forward"},
        "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "forwarder"}]
    }))
    .expect("binding");
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(&PostParams::default(), &binding)
        .await
        .expect("binding");

    let theirs: Api<Pod> = Api::namespaced(client(&server, Some("forwarder")), "default");
    // `get` alone: the WebSocket upgrade needs `create` too (kube-apiserver 1.35).
    let (code, msg) = api_error(
        theirs
            .portforward("echo", &[port])
            .await
            .err()
            .expect("403"),
    );
    assert_eq!(code, 403);
    assert!(
        msg.starts_with("pods \"echo\" is forbidden: User \"forwarder\" cannot create resource \"pods/portforward\" in API group \"\" in the namespace \"default\""),
        "{msg}"
    );

    let mut r = roles.get("forward").await.expect("role");
    r.rules = role(&["get", "create"]).rules;
    roles
        .replace("forward", &PostParams::default(), &r)
        .await
        .expect("role updated");
    let mut pf = theirs
        .portforward("echo", &[port])
        .await
        .expect("allowed now");
    let mut s = pf.take_stream(port).expect("stream");
    s.write_all(b"ok").await.expect("write");
    let mut got = [0u8; 2];
    s.read_exact(&mut got).await.expect("read");
    assert_eq!(&got, b"ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_port_forward_is_refused_it_speaks_spdy() {
    let Some(bin) = kubectl_or_skip("kubectl_port_forward_is_refused_it_speaks_spdy") else {
        return;
    };
    let server = manual_server().await;
    let pods: Api<Pod> = Api::namespaced(client(&server, None), "default");
    pod(&pods, "echo", Some("node-a"), "Running", Some(POD_IP)).await;
    let port = echo().await;
    let k = Kubectl::new(bin, &server, "portforward");
    let out = k
        .run(&[
            "port-forward",
            "-n",
            "default",
            "pod/echo",
            &format!("0:{port}"),
            "--address",
            "127.0.0.1",
        ])
        .await;
    // kubectl ≥ 1.31 first asks for SPDY tunnelled over WebSocket
    // (`SPDY/3.1+portforward.k8s.io`), is refused, falls back to SPDY.
    // kubectl versions word the wrapper differently ("unable to upgrade
    // connection: ..." or not); the server's own sentence is what counts.
    assert!(!out.ok, "kubectl port-forward succeeded: {out:?}");
    assert!(
        out.stderr.starts_with("error: error upgrading connection: ")
            && out.stderr.ends_with(
                "unable to upgrade: SPDY/3.1 is not supported by the test API server, which forwards ports over WebSocket (v4.channel.k8s.io) only\n"
            ),
        "{}",
        out.stderr
    );
}
