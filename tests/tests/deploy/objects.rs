//! The chart's rendered objects fit together: config, probes, Service,
//! ServiceMonitor, lease Role, the pod's security, the API's exposure.

use super::*;

/// The one object of `kind` (and `name`, when given).
fn one<'a>(objects: &'a [(PathBuf, Value)], k: &str) -> &'a Value {
    let found: Vec<&Value> = objects
        .iter()
        .map(|(_, o)| o)
        .filter(|o| kind(o) == k)
        .collect();
    assert_eq!(found.len(), 1, "expected one {k}, found {}", found.len());
    found[0]
}

fn maybe<'a>(objects: &'a [(PathBuf, Value)], k: &str) -> Option<&'a Value> {
    objects.iter().map(|(_, o)| o).find(|o| kind(o) == k)
}

/// The "restricted" Pod Security Standard's rules, as they apply to this
/// pod template.
fn check_restricted(pod: &Value, what: &str) {
    let spec = &pod["spec"];
    for host in ["hostNetwork", "hostPID", "hostIPC"] {
        assert!(spec[host].as_bool() != Some(true), "{what}: {host} is set");
    }
    assert_eq!(spec["securityContext"]["runAsNonRoot"], true, "{what}");
    assert_eq!(
        spec["securityContext"]["seccompProfile"]["type"], "RuntimeDefault",
        "{what}"
    );
    // The volume types the restricted standard allows (no hostPath).
    let allowed = [
        "configMap",
        "csi",
        "downwardAPI",
        "emptyDir",
        "ephemeral",
        "persistentVolumeClaim",
        "projected",
        "secret",
    ];
    for v in spec["volumes"].as_array().into_iter().flatten() {
        let types: Vec<&str> = v
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, _)| k.as_str())
            .filter(|k| *k != "name")
            .collect();
        assert!(
            types.len() == 1 && allowed.contains(&types[0]),
            "{what}: volume {v} is not of a type the restricted standard allows"
        );
    }
    let containers = spec["containers"].as_array().expect("containers");
    assert!(!containers.is_empty(), "{what}: no container");
    for c in containers {
        let sc = &c["securityContext"];
        assert_eq!(sc["allowPrivilegeEscalation"], false, "{what}");
        assert_eq!(sc["privileged"], false, "{what}");
        assert_eq!(sc["runAsNonRoot"], true, "{what}");
        assert_eq!(sc["runAsUser"], 65532, "{what}");
        assert_eq!(sc["readOnlyRootFilesystem"], true, "{what}");
        assert_eq!(strings(&sc["capabilities"]["drop"]), ["ALL"], "{what}");
        assert!(sc["capabilities"].get("add").is_none(), "{what}");
        assert_eq!(sc["seccompProfile"]["type"], "RuntimeDefault", "{what}");
        assert!(c.get("ports").is_some_and(|p| {
            p.as_array()
                .is_some_and(|p| p.iter().all(|p| p.get("hostPort").is_none()))
        }));
    }
}

fn labels_match(selector: &Value, labels: &Value) -> bool {
    selector
        .as_object()
        .is_some_and(|s| !s.is_empty() && s.iter().all(|(k, v)| &labels[k] == v))
}

#[test]
fn rendered_objects_fit_together() {
    if !helm_or_skip("rendered_objects_fit_together") {
        return;
    }
    for set in VALUE_SETS {
        let what = set.name;
        let rendered = render_ok(set);
        let objects = rendered.objects();

        // The config is one the service accepts.
        let cm = one(&objects, "ConfigMap");
        let config_text = cm["data"]["config.yaml"]
            .as_str()
            .expect("ConfigMap data config.yaml");
        let settings = trainyard_serve::Settings::parse(config_text, "config.yaml")
            .unwrap_or_else(|e| panic!("values {what}: the rendered config is refused: {e}"));
        let config: Value = serde_saphyr::from_str(config_text).expect("config YAML");
        let service = &config["service"];
        let election = &service["leaderElection"];
        assert_eq!(election["enabled"], set.leader_election, "{what}");
        let port: u64 = service["httpAddress"]
            .as_str()
            .and_then(|a| a.rsplit_once(':'))
            .and_then(|(_, p)| p.parse().ok())
            .unwrap_or_else(|| panic!("{what}: httpAddress {}", service["httpAddress"]));
        // `trainyard serve` listens on loopback unless told otherwise; in
        // a pod the probes and Prometheus come from outside it.
        assert_eq!(
            settings.service.http_address,
            format!("0.0.0.0:{port}"),
            "{what}: the chart must ask for every interface"
        );

        // The Deployment runs the config it mounts.
        let deployment = one(&objects, "Deployment");
        let spec = &deployment["spec"];
        assert_eq!(spec["replicas"], set.replicas, "{what}");
        assert_eq!(spec["strategy"]["type"], "RollingUpdate", "{what}");
        assert_eq!(
            spec["strategy"]["rollingUpdate"]["maxUnavailable"], 0,
            "{what}"
        );
        let pod = &spec["template"];
        let pod_labels = &pod["metadata"]["labels"];
        assert!(
            labels_match(&spec["selector"]["matchLabels"], pod_labels),
            "{what}: the Deployment's selector does not select its pods"
        );
        check_restricted(pod, what);
        assert_eq!(
            pod["spec"]["priorityClassName"], "system-cluster-critical",
            "{what}"
        );
        let c = &pod["spec"]["containers"][0];
        assert_eq!(
            strings(&c["args"])[..3],
            ["serve", "--config", "/etc/trainyard/config.yaml"],
            "{what}"
        );
        let mount = c["volumeMounts"]
            .as_array()
            .and_then(|m| m.iter().find(|m| m["mountPath"] == "/etc/trainyard"))
            .unwrap_or_else(|| panic!("{what}: no mount at /etc/trainyard"));
        let volume = pod["spec"]["volumes"]
            .as_array()
            .and_then(|v| v.iter().find(|v| v["name"] == mount["name"]))
            .expect("the mounted volume");
        assert_eq!(volume["configMap"]["name"], name(cm), "{what}");
        // The store, when on: a writable volume at /var/lib/trainyard, and
        // the config's store path inside it.
        let store_mount = c["volumeMounts"]
            .as_array()
            .and_then(|m| m.iter().find(|m| m["mountPath"] == "/var/lib/trainyard"));
        match set.store {
            Some(backend) => {
                let m = store_mount.unwrap_or_else(|| panic!("{what}: no store mount"));
                assert_ne!(m["readOnly"], true, "{what}");
                let v = pod["spec"]["volumes"]
                    .as_array()
                    .and_then(|v| v.iter().find(|v| v["name"] == m["name"]))
                    .unwrap_or_else(|| panic!("{what}: the store's volume"));
                assert!(v["emptyDir"].is_object(), "{what}: {v}");
                let store = &settings.service.store;
                assert_eq!(
                    store.path,
                    format!("/var/lib/trainyard/state.{backend}"),
                    "{what}"
                );
                assert_eq!(store.backend.name(), backend, "{what}");
            }
            None => {
                assert!(store_mount.is_none(), "{what}");
                assert!(settings.service.store.path.is_empty(), "{what}");
            }
        }
        let env: BTreeMap<&str, &Value> = c["env"]
            .as_array()
            .expect("env")
            .iter()
            .map(|e| (e["name"].as_str().unwrap_or(""), e))
            .collect();
        for (var, field) in [
            ("POD_NAME", "metadata.name"),
            ("POD_NAMESPACE", "metadata.namespace"),
        ] {
            assert_eq!(
                env.get(var)
                    .map(|e| &e["valueFrom"]["fieldRef"]["fieldPath"]),
                Some(&Value::from(field)),
                "{what}: {var} from the downward API"
            );
        }
        let container_port = c["ports"]
            .as_array()
            .and_then(|p| p.iter().find(|p| p["name"] == "http-metrics"))
            .unwrap_or_else(|| panic!("{what}: no port http-metrics"));
        assert_eq!(container_port["containerPort"], port, "{what}");
        for (probe, path) in [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")] {
            assert_eq!(c[probe]["httpGet"]["path"], path, "{what}");
            assert_eq!(c[probe]["httpGet"]["port"], "http-metrics", "{what}");
        }
        for r in ["requests", "limits"] {
            for res in ["cpu", "memory"] {
                assert!(
                    !c["resources"][r][res].is_null() || (r, res) == ("limits", "cpu"),
                    "{what}: resources.{r}.{res}"
                );
            }
        }
        let anti = &pod["spec"]["affinity"]["podAntiAffinity"];
        assert_eq!(
            !anti.is_null(),
            set.replicas > 1,
            "{what}: anti-affinity across nodes exactly when replicas > 1"
        );

        // ServiceAccount and its bindings.
        let sa = one(&objects, "ServiceAccount");
        assert_eq!(pod["spec"]["serviceAccountName"], sa["metadata"]["name"]);
        let namespace = sa["metadata"]["namespace"].clone();
        for binding in ["ClusterRoleBinding", "RoleBinding"] {
            for b in objects
                .iter()
                .map(|(_, o)| o)
                .filter(|o| kind(o) == binding)
            {
                let subject = &b["subjects"][0];
                assert_eq!(subject["kind"], "ServiceAccount", "{what}");
                assert_eq!(subject["name"], sa["metadata"]["name"], "{what}");
                assert_eq!(subject["namespace"], namespace, "{what}");
                let role_kind = if binding == "RoleBinding" {
                    "Role"
                } else {
                    "ClusterRole"
                };
                assert_eq!(b["roleRef"]["kind"], role_kind);
                one(&objects, role_kind);
            }
        }

        // The Role grants the config's Lease (with leader election) and
        // its checkpoint ConfigMap (with checkpoints) in its namespace.
        let store = &service["store"];
        let checkpoint = store["checkpointSeconds"].as_u64().unwrap_or(0) > 0;
        match maybe(&objects, "Role") {
            Some(role) => {
                assert!(
                    set.leader_election || checkpoint,
                    "{what}: a Role without election or checkpoint"
                );
                assert_eq!(election["leaseNamespace"], role["metadata"]["namespace"]);
                let named = |resource: &str| -> Option<Vec<String>> {
                    role["rules"]
                        .as_array()
                        .expect("rules")
                        .iter()
                        .find(|r| {
                            r.get("resourceNames").is_some()
                                && strings(&r["resources"]) == [resource]
                        })
                        .map(|r| strings(&r["resourceNames"]))
                };
                assert_eq!(
                    named("leases"),
                    set.leader_election
                        .then(|| vec![election["leaseName"].as_str().unwrap_or("").to_string()]),
                    "{what}"
                );
                assert_eq!(
                    named("configmaps"),
                    checkpoint
                        .then(|| vec![store["checkpointName"].as_str().unwrap_or("").to_string()]),
                    "{what}"
                );
                one(&objects, "RoleBinding");
            }
            None => assert!(
                !set.leader_election && !checkpoint,
                "{what}: no Role for the lease or the checkpoint"
            ),
        }
        assert_eq!(
            settings.service.scheduler_name,
            service["schedulerName"].as_str().unwrap_or("trainyard")
        );

        // Service and ServiceMonitor reach the pods' metrics port.
        let services: Vec<&Value> = objects
            .iter()
            .map(|(_, o)| o)
            .filter(|o| kind(o) == "Service")
            .collect();
        let by_port = |p: &str| {
            services
                .iter()
                .copied()
                .find(|s| s["spec"]["ports"][0]["name"] == p)
        };
        let svc = by_port("http-metrics").unwrap_or_else(|| panic!("{what}: no metrics Service"));
        // The gRPC API's Service exactly when exposed, with its TLS flags.
        assert_eq!(services.len(), 1 + usize::from(set.api_exposed), "{what}");
        if let Some(api) = by_port("grpc-api") {
            assert!(set.api_exposed, "{what}: API Service not asked for");
            assert!(labels_match(&api["spec"]["selector"], pod_labels), "{what}");
            let args = strings(&pod["spec"]["containers"][0]["args"]);
            for flag in ["--api-listen", "--api-tls-cert", "--api-tls-key"] {
                assert!(
                    args.iter().any(|a| a == flag),
                    "{what}: no {flag} in {args:?}"
                );
            }
            let ports = &pod["spec"]["containers"][0]["ports"];
            assert!(
                ports
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|p| p["name"] == "grpc-api"),
                "{what}: no grpc-api container port"
            );
        }
        assert!(
            labels_match(&svc["spec"]["selector"], pod_labels),
            "{what}: the Service does not select the pods"
        );
        let svc_port = &svc["spec"]["ports"][0];
        assert_eq!(svc_port["name"], "http-metrics");
        assert_eq!(svc_port["targetPort"], "http-metrics");
        assert_eq!(svc_port["port"], port);
        match maybe(&objects, "ServiceMonitor") {
            Some(sm) => {
                assert!(set.service_monitor, "{what}: ServiceMonitor not asked for");
                assert_eq!(sm["apiVersion"], "monitoring.coreos.com/v1");
                assert!(
                    labels_match(
                        &sm["spec"]["selector"]["matchLabels"],
                        &svc["metadata"]["labels"]
                    ),
                    "{what}: the ServiceMonitor does not select the Service"
                );
                assert!(
                    strings(&sm["spec"]["namespaceSelector"]["matchNames"])
                        .iter()
                        .any(|n| Some(n.as_str()) == svc["metadata"]["namespace"].as_str()),
                    "{what}: the ServiceMonitor looks in another namespace"
                );
                let endpoint = &sm["spec"]["endpoints"][0];
                assert_eq!(endpoint["port"], "http-metrics", "{what}");
                assert_eq!(endpoint["path"], "/metrics", "{what}");
                assert_eq!(
                    sm["metadata"]["labels"]["release"], "prometheus",
                    "{what}: the ServiceMonitor's extra labels"
                );
            }
            None => assert!(!set.service_monitor, "{what}: no ServiceMonitor"),
        }

        // A PodDisruptionBudget keeps one replica, when there are several.
        match maybe(&objects, "PodDisruptionBudget") {
            Some(pdb) => {
                assert!(set.replicas > 1, "{what}: a PDB for one replica");
                let min = pdb["spec"]["minAvailable"].as_u64().expect("minAvailable");
                assert!(min >= 1 && min < set.replicas, "{what}: minAvailable {min}");
                assert!(
                    labels_match(&pdb["spec"]["selector"]["matchLabels"], pod_labels),
                    "{what}: the PDB does not select the pods"
                );
            }
            None => assert_eq!(set.replicas, 1, "{what}: no PodDisruptionBudget"),
        }

        // Standard labels on every object the chart renders.
        for (f, o) in &objects {
            if kind(o) == "CustomResourceDefinition" {
                continue;
            }
            let labels = &o["metadata"]["labels"];
            for l in [
                "app.kubernetes.io/name",
                "app.kubernetes.io/instance",
                "app.kubernetes.io/version",
                "app.kubernetes.io/managed-by",
                "helm.sh/chart",
            ] {
                assert!(
                    labels[l].is_string(),
                    "{what}: {} {} ({}) has no label {l}",
                    kind(o),
                    name(o),
                    f.display()
                );
            }
        }
    }
}
