//! Lists at `resourceVersion=0` are answered whole, in one page, as
//! kube-apiserver answers them from its watch cache (client-go's reflectors
//! send `resourceVersion=0&limit=500` first); other lists keep paginating.
//! Protobuf request bodies are refused with a 415 `Status`.

mod common;

use common::manual_server;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, ListParams, PostParams};
use kube::core::Status;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use trainyard_testapi::TestApiServer;

fn client(server: &TestApiServer) -> Client {
    let config = kube::Config::new(server.url().parse().expect("url"));
    Client::try_from(config).expect("client")
}

fn obj<K: DeserializeOwned>(v: Value) -> K {
    serde_json::from_value(v).expect("object")
}

fn status(e: kube::Error) -> Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("not an API error: {other:?}"),
    }
}

fn fields(s: &Status) -> Vec<String> {
    s.details
        .as_ref()
        .map(|d| d.causes.iter().map(|c| c.field.clone()).collect())
        .unwrap_or_default()
}

/// A raw GET through kube's client (kube-rs itself never sends
/// `resourceVersion=0` together with `limit`).
async fn get_raw(c: &Client, path: &str, accept: Option<&str>) -> Result<Value, kube::Error> {
    let mut req = http::Request::get(path);
    if let Some(a) = accept {
        req = req.header("Accept", a);
    }
    c.request::<Value>(req.body(Vec::new()).expect("request"))
        .await
}

fn container() -> Value {
    json!([{"name": "main", "image": "busybox:1.36"}])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_at_resource_version_zero_come_whole_in_one_page() {
    let server = manual_server().await;
    let c = client(&server);
    let pp = PostParams::default();
    let cms: Api<ConfigMap> = Api::default_namespaced(c.clone());
    let jobs: Api<Job> = Api::default_namespaced(c.clone());
    for n in ["a", "b", "c"] {
        cms.create(&pp, &obj(json!({"metadata": {"name": n}})))
            .await
            .expect("configmap");
        jobs.create(
            &pp,
            &obj(
                json!({"metadata": {"name": n}, "spec": {"template": {"spec": {
            "restartPolicy": "Never", "containers": container()}}}}),
            ),
        )
        .await
        .expect("job");
    }
    let count = |v: &Value| v["items"].as_array().map_or(0, Vec::len);
    for base in [
        "/api/v1/namespaces/default/configmaps",
        "/apis/batch/v1/jobs",
    ] {
        // Without resourceVersion=0: pages, with a continue token.
        let paged = get_raw(&c, &format!("{base}?limit=1"), None)
            .await
            .expect("list");
        assert_eq!(count(&paged), 1, "{paged}");
        assert!(paged["metadata"]["continue"].is_string(), "{paged}");
        assert_eq!(paged["metadata"]["remainingItemCount"], 2);
        let at_rv = get_raw(
            &c,
            &format!("{base}?limit=1&resourceVersion=3&resourceVersionMatch=NotOlderThan"),
            None,
        )
        .await
        .expect("list");
        assert_eq!(count(&at_rv), 1, "{at_rv}");
        // resourceVersion=0, what a client-go reflector sends first (with
        // limit=500): answered whole from the watch cache, limit ignored.
        for q in [
            "resourceVersion=0&limit=1",
            "resourceVersion=0&resourceVersionMatch=NotOlderThan&limit=1",
        ] {
            let whole = get_raw(&c, &format!("{base}?{q}"), None)
                .await
                .expect("list");
            assert_eq!(count(&whole), 3, "{q}: {whole}");
            assert!(whole["metadata"].get("continue").is_none(), "{q}: {whole}");
            assert!(
                whole["metadata"].get("remainingItemCount").is_none(),
                "{q}: {whole}"
            );
            assert_eq!(
                whole["metadata"]["resourceVersion"],
                server.resource_version().to_string()
            );
        }
        let table = get_raw(
            &c,
            &format!("{base}?resourceVersion=0&limit=1"),
            Some("application/json;as=Table;v=v1;g=meta.k8s.io"),
        )
        .await
        .expect("table");
        assert_eq!(table["rows"].as_array().map_or(0, Vec::len), 3, "{table}");
    }
    let e = status(
        get_raw(
            &c,
            "/api/v1/namespaces/default/configmaps?resourceVersion=0&resourceVersionMatch=Exact",
            None,
        )
        .await
        .expect_err("Exact at 0 is refused"),
    );
    assert_eq!(
        (e.code, fields(&e)),
        (422, vec!["resourceVersionMatch".to_string()])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protobuf_bodies_are_refused_with_a_415_status() {
    let server = manual_server().await;
    let c = client(&server);
    for path in [
        "/api/v1/namespaces/default/configmaps",
        "/apis/batch/v1/namespaces/default/jobs",
    ] {
        let req = http::Request::post(path)
            .header("Content-Type", "application/vnd.kubernetes.protobuf")
            .header(
                "Accept",
                "application/vnd.kubernetes.protobuf, application/json",
            )
            .body(b"k8s\x00\n\x0c\n\x02v1\x12\x06Binding".to_vec())
            .expect("request");
        let e = status(c.request::<Value>(req).await.expect_err("415"));
        assert_eq!(
            (e.code, e.reason.as_str(), e.status),
            (
                415,
                "UnsupportedMediaType",
                Some(kube::core::response::StatusSummary::Failure)
            )
        );
        assert!(
            e.message
                .contains("accepted media types include: application/json")
                && e.message.contains("application/vnd.kubernetes.protobuf"),
            "{}",
            e.message
        );
    }
    let cms: Api<ConfigMap> = Api::default_namespaced(c.clone());
    assert!(
        cms.list(&ListParams::default())
            .await
            .expect("list")
            .items
            .is_empty()
    );
}
