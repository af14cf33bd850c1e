//! Each view of the dashboard read from the DOM and compared with the
//! gRPC API's answers and the cluster's objects (the checks of
//! `every_view_shows_what_the_api_answers_and_follows_the_cluster`).

use super::*;

/// Queues: every queue of ListQueues with its weight, job counts and per
/// resource the raw numbers; the invalid queue; conditions as the Queue
/// objects have them.
pub(super) async fn check_queues(
    browser: &mut Browser,
    rpc: &mut SchedulerClient<Channel>,
    server: &TestApiServer,
    cycle: u64,
) {
    let queues = rpc
        .list_queues(pb::ListQueuesRequest {})
        .await
        .expect("queues")
        .into_inner();
    let at = queues.cycle.as_ref().map_or(cycle, |c| c.number);
    let page = browser.goto("#/queues", at).await;
    assert_eq!(page["view"], "queues", "{page}");
    assert!(page["error"].is_null(), "{page}");
    assert_eq!(
        s(&page["nav"]),
        r#"["queues","jobs","gpus","evictions"]"#,
        "the nav's views"
    );
    let shown = browser.read("queues").await;
    let rows = shown["data"].as_array().expect("queue rows").clone();
    let valid: Vec<&Value> = rows.iter().filter(|r| r["invalid"] != true).collect();
    let names: Vec<String> = valid.iter().map(|r| s(&r["name"])).collect();
    let want: Vec<String> = queues.queues.iter().map(|q| q.name.clone()).collect();
    assert_eq!(names, want, "the queues in ListQueues' (tree) order");
    for q in &queues.queues {
        let r = valid
            .iter()
            .find(|r| r["name"] == q.name.as_str())
            .expect("a row");
        let what = format!("queue {}: {r}", q.name);
        assert_eq!(s(&r["weight"]), q.weight.to_string(), "{what}");
        assert_eq!(s(&r["running"]), q.running_jobs.to_string(), "{what}");
        assert_eq!(s(&r["pending"]), q.pending_jobs.to_string(), "{what}");
        for res in &q.resources {
            let d = &r["resources"][&res.resource];
            assert!(d.is_object(), "{what}: no [data-resource={}]", res.resource);
            let limit = res.limit.as_ref();
            let want_limit = match limit {
                Some(l) if !l.unlimited => l.value.to_string(),
                _ => "unlimited".to_string(),
            };
            assert_eq!(s(&d["quota"]), res.quota.to_string(), "{what}: quota");
            assert_eq!(s(&d["limit"]), want_limit, "{what}: limit");
            assert_eq!(
                s(&d["fairShare"]),
                res.fair_share.to_string(),
                "{what}: fair share"
            );
            assert_eq!(
                s(&d["allocated"]),
                res.allocated.to_string(),
                "{what}: allocated"
            );
            assert_eq!(
                s(&d["pendingDemand"]),
                res.pending_demand.to_string(),
                "{what}: pending demand"
            );
        }
    }
    // The numbers this cluster must show (not only "as the RPC says").
    let team = |name: &str| queues.queues.iter().find(|q| q.name == name).expect(name);
    let gpu = |name: &str| {
        team(name)
            .resources
            .iter()
            .find(|r| r.resource == GPU)
            .cloned()
            .expect("a GPU row")
    };
    assert_eq!(
        gpu("team-a").allocated,
        8000,
        "two 4-GPU jobs of team a are left"
    );
    assert_eq!(gpu("team-b").allocated, 10_000, "b-big and tune");
    assert_eq!(gpu("capped").limit.as_ref().map(|l| l.value), Some(2000));
    assert_eq!(team("team-a").pending_jobs, 1);

    // The invalid queue: shown apart, marked.
    let orphan = rows
        .iter()
        .find(|r| r["name"] == "orphan")
        .expect("the invalid queue orphan is shown");
    assert_eq!(orphan["invalid"], true, "{orphan}");
    assert!(!want.contains(&"orphan".to_string()));

    // Conditions: each condition of each Queue object, as its status has it.
    for r in &rows {
        let name = s(&r["name"]);
        let Some(o) = server.get("trainyard.io/v1alpha1", "Queue", "", &name) else {
            continue;
        };
        let text = s(&r["conditions"]);
        for c in o["status"]["conditions"].as_array().into_iter().flatten() {
            for k in ["type", "status", "reason", "message"] {
                let v = s(&c[k]);
                assert!(
                    text.contains(&v),
                    "queue {name}: the conditions cell {text:?} lacks {k} {v:?}"
                );
            }
        }
    }
    shoot(browser, "queues").await;
}

/// Jobs: the count and every row against ListJobs (state, queue, pods,
/// reason, placement from the cluster's pods, age), then filtered by the
/// hash and by the filter inputs against ListJobs with the same filter.
pub(super) async fn check_jobs(
    browser: &mut Browser,
    rpc: &mut SchedulerClient<Channel>,
    client: &kube::Client,
    cycle: u64,
) {
    let placed = placements(client).await;
    let cases: [(&str, pb::ListJobsRequest); 5] = [
        ("#/jobs", pb::ListJobsRequest::default()),
        (
            "#/jobs?state=pending",
            pb::ListJobsRequest {
                state: pb::JobState::Pending as i32,
                ..Default::default()
            },
        ),
        (
            "#/jobs?queue=team-b",
            pb::ListJobsRequest {
                queue: "team-b".into(),
                ..Default::default()
            },
        ),
        (
            "#/jobs?namespace=research",
            pb::ListJobsRequest {
                namespace: "research".into(),
                ..Default::default()
            },
        ),
        (
            "#/jobs?user=ml&state=running",
            pb::ListJobsRequest {
                user: "ml".into(),
                state: pb::JobState::Running as i32,
                ..Default::default()
            },
        ),
    ];
    for (hash, req) in cases {
        let jobs = rpc.list_jobs(req).await.expect("jobs").into_inner();
        let at = jobs.cycle.as_ref().map_or(cycle, |c| c.number);
        // A fresh view (the hash changes the view's parameters only when
        // the view is mounted): through another view.
        browser.goto("#/queues", 0).await;
        let page = browser.goto(hash, at).await;
        assert!(page["error"].is_null(), "{hash}: {page}");
        compare_jobs(browser, hash, &jobs, &placed).await;
        if hash == "#/jobs" {
            shoot(browser, "jobs").await;
        }
    }

    // The filter inputs, typed: the table follows.
    browser.goto("#/queues", 0).await;
    browser.goto("#/jobs", 0).await;
    let jobs = rpc
        .list_jobs(pb::ListJobsRequest {
            namespace: "research".into(),
            ..Default::default()
        })
        .await
        .expect("jobs")
        .into_inner();
    browser
        .cmd(json!({"fill": "#filter-namespace", "text": "research"}))
        .await;
    browser
        .cmd(json!({"wait": "#jobs-count", "attr": "data-count", "value": jobs.jobs.len().to_string()}))
        .await;
    browser
        .cmd(json!({"wait": "tr[data-job=\"ml/wait\"]", "gone": true}))
        .await;
    compare_jobs(browser, "namespace typed", &jobs, &placed).await;
    let hash = browser.read("page").await["page"]["hash"].clone();
    assert!(
        s(&hash).contains("namespace=research"),
        "the filter is kept in the hash: {hash}"
    );
    browser
        .cmd(json!({"fill": "#filter-namespace", "text": ""}))
        .await;
    let pending = rpc
        .list_jobs(pb::ListJobsRequest {
            state: pb::JobState::Pending as i32,
            ..Default::default()
        })
        .await
        .expect("jobs")
        .into_inner();
    browser
        .cmd(json!({"select": "#filter-state", "value": "pending"}))
        .await;
    browser
        .cmd(json!({"wait": "#jobs-count", "attr": "data-count", "value": pending.jobs.len().to_string()}))
        .await;
    browser
        .cmd(json!({"wait": "tr[data-job=\"ml/b-big\"]", "gone": true}))
        .await;
    compare_jobs(browser, "state selected", &pending, &placed).await;
}

pub(super) async fn compare_jobs(
    browser: &mut Browser,
    what: &str,
    jobs: &pb::ListJobsResponse,
    placed: &BTreeMap<String, (String, Vec<u32>)>,
) {
    let shown = browser.read("jobs").await;
    let d = &shown["data"];
    assert_eq!(
        d["count"].as_u64(),
        Some(jobs.jobs.len() as u64),
        "{what}: #jobs-count against ListJobs: {d}"
    );
    let rows = d["rows"].as_array().expect("rows");
    let ids: BTreeSet<String> = rows.iter().map(|r| s(&r["job"])).collect();
    let want: BTreeSet<String> = jobs
        .jobs
        .iter()
        .map(|j| format!("{}/{}", j.namespace, j.name))
        .collect();
    assert_eq!(ids, want, "{what}: the rows (few jobs: all in view)");
    for j in &jobs.jobs {
        let id = format!("{}/{}", j.namespace, j.name);
        let r = rows.iter().find(|r| r["job"] == id.as_str()).expect("row");
        let w = format!("{what}: {id}: {r}");
        assert_eq!(s(&r["state"]), state_name(j.state), "{w}");
        assert_eq!(s(&r["queue"]), j.queue, "{w}");
        assert_eq!(s(&r["pods"]), format!("{}/{}", j.pods_bound, j.pods), "{w}");
        let reason = s(&r["reason"]);
        assert!(
            reason.contains(&j.reason) && reason.contains(j.message.trim()),
            "{w}: reason {:?} {:?}",
            j.reason,
            j.message
        );
        // Where its pods are: the cluster's bound pods of this job (one
        // pod per job here, named as the job).
        let nodes = placed.get(&id).map(|(n, _)| n.clone()).unwrap_or_default();
        assert_eq!(s(&r["placement"]), nodes, "{w}: placement");
        let age: i64 = s(&r["ageSeconds"]).parse().expect("data-seconds");
        assert!(
            (age - j.age_seconds as i64).abs() <= 120,
            "{w}: age {age} against {}",
            j.age_seconds
        );
    }
}

/// Job: `ml/wait` (pending) against ExplainJob, ForecastStart and its
/// pod; the what-if form against WhatIf; `ml/b-big`'s evictions (made
/// for it) against WatchDecisions.
pub(super) async fn check_job(
    browser: &mut Browser,
    rpc: &mut SchedulerClient<Channel>,
    client: &kube::Client,
    cycle: u64,
    victims: &[pb::Victim],
) {
    let why = rpc
        .explain_job(pb::ExplainJobRequest {
            namespace: "ml".into(),
            name: "wait".into(),
        })
        .await
        .expect("explained")
        .into_inner();
    let page = browser.goto("#/job/ml/wait", cycle).await;
    assert!(page["error"].is_null(), "{page}");
    // The forecast is asked on load for a pending job.
    browser
        .cmd(json!({"wait": "#job-forecast[data-starts]", "timeout": 60000}))
        .await;
    let shown = browser.read("job").await;
    let d = &shown["data"];
    assert_eq!(d["job"], "ml/wait", "{d}");
    let job = why.job.as_ref().expect("the job");
    assert_eq!(s(&d["state"]), state_name(job.state), "{d}");
    assert_eq!(s(&d["state"]), "JOB_STATE_PENDING");
    let cause = pb::Cause::try_from(why.cause)
        .expect("a cause")
        .as_str_name();
    assert_eq!(s(&d["cause"]), cause, "#job-explain[data-cause]: {d}");
    let explain = s(&d["explain"]);
    assert!(
        explain.contains(&why.summary),
        "{explain:?} lacks {:?}",
        why.summary
    );
    assert!(
        explain.contains(&why.reason),
        "{explain:?} lacks {:?}",
        why.reason
    );
    let reasons = d["nodeReasons"].as_array().expect("node reasons");
    assert_eq!(reasons.len(), why.node_reasons.len(), "{d}");
    for (li, nr) in reasons.iter().zip(&why.node_reasons) {
        let li = s(li);
        assert!(
            li.contains(&nr.reason) && li.contains(&nr.nodes.to_string()),
            "{li:?} against {nr:?}"
        );
    }
    let pods = d["pods"].as_array().expect("pods");
    assert_eq!(pods.len(), 1, "{d}");
    assert_eq!(pods[0]["pod"], "wait");
    assert_eq!(s(&pods[0]["node"]), "", "not bound: no node");
    // The forecast: as ForecastStart answers (its default look-ahead, as
    // the page asks it).
    let fc = rpc
        .forecast_start(pb::ForecastStartRequest {
            job: Some(pb::forecast_start_request::Job::Existing(
                pb::ExplainJobRequest {
                    namespace: "ml".into(),
                    name: "wait".into(),
                },
            )),
            horizon_seconds: 0,
        })
        .await
        .expect("a forecast")
        .into_inner();
    assert_eq!(
        s(&d["forecast"]["starts"]),
        fc.starts.to_string(),
        "#job-forecast[data-starts] against ForecastStart: {d} / {fc:?}"
    );
    if fc.starts {
        let p50: i64 = s(&d["forecast"]["p50Ms"]).parse().expect("data-p50-ms");
        assert!(
            (p50 - fc.p50_ms).abs() <= 120_000,
            "{p50} against {}",
            fc.p50_ms
        );
    }
    // Events: it is pending, and says so.
    let kinds = event_kinds(d);
    assert!(kinds.iter().any(|k| k == "Pending"), "{kinds:?}");
    // The form starts from the job's own sizes.
    assert_eq!(s(&d["whatif"]["pods"]), job.pods.to_string());
    assert_eq!(
        s(&d["whatif"]["gpus"]),
        (job.gpu_milli / 1000 / u64::from(job.pods)).to_string()
    );
    shoot(browser, "job").await;

    // What if it asked 8 GPUs in 2 pods: as WhatIf answers.
    for (pods, gpus, min) in [(2u32, 4u32, 2u32), (1, 6, 1)] {
        browser
            .cmd(json!({"fill": "#whatif-pods", "text": pods}))
            .await;
        browser
            .cmd(json!({"fill": "#whatif-gpus", "text": gpus}))
            .await;
        browser
            .cmd(json!({"fill": "#whatif-min", "text": min}))
            .await;
        browser.cmd(json!({"eval": "() => { const r = document.querySelector('#whatif-result'); delete r.dataset.fits; r.textContent = ''; }"})).await;
        browser.cmd(json!({"click": "#whatif-run"})).await;
        browser
            .cmd(json!({"wait": "#whatif-result[data-fits]", "timeout": 30000}))
            .await;
        let what = rpc
            .what_if(pb::WhatIfRequest {
                job: Some(pb::what_if_request::Job::Resize(pb::Resize {
                    namespace: "ml".into(),
                    name: "wait".into(),
                    pods,
                    min_member: min,
                    gpus_per_pod: gpus,
                })),
            })
            .await
            .expect("a what-if")
            .into_inner();
        let shown = browser.read("job").await;
        let wi = &shown["data"]["whatif"];
        let w = format!("what-if {pods}×{gpus} (min {min}): {wi} / {what:?}");
        assert_eq!(s(&wi["fits"]), what.fits.to_string(), "{w}");
        let start = what.reservation.as_ref().map_or(0, |r| r.start_ms);
        if !what.fits && start != 0 {
            assert_eq!(s(&wi["startMs"]), start.to_string(), "{w}");
        }
        let text = s(&wi["text"]);
        if what.fits {
            for p in what.binds.iter().chain(&what.nominations) {
                assert!(text.contains(&p.node), "{w}: node {}", p.node);
            }
            for v in &what.evictions {
                assert!(text.contains(&v.pod), "{w}: victim {}", v.pod);
            }
        } else {
            assert!(text.contains(&what.reason), "{w}");
        }
    }

    // b-big: bound where the cluster has it; the evictions made for it.
    let placed = placements(client).await;
    browser.goto("#/job/ml/b-big", cycle).await;
    browser
        .cmd(json!({"wait": "#job-evictions tr[data-eviction]"}))
        .await;
    let shown = browser.read("job").await;
    let d = &shown["data"];
    assert_eq!(s(&d["state"]), "JOB_STATE_RUNNING", "{d}");
    assert_eq!(s(&d["pods"][0]["node"]), placed["ml/b-big"].0, "{d}");
    assert_eq!(s(&d["cause"]), "", "nothing pending: no cause");
    let ids: BTreeSet<String> = d["evictions"]
        .as_array()
        .expect("evictions")
        .iter()
        .map(|e| s(&e["id"]))
        .collect();
    let pods: BTreeSet<String> = ids
        .iter()
        .map(|i| i.split_once(':').map_or(i.clone(), |(_, p)| p.to_string()))
        .collect();
    let want: BTreeSet<String> = victims.iter().map(|v| v.pod.clone()).collect();
    assert_eq!(pods, want, "b-big's evictions against WatchDecisions: {d}");
    let kinds: BTreeSet<String> = d["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| s(&e["kind"]))
        .collect();
    assert!(kinds.contains("Bound"), "{kinds:?}");
}

/// GPUs: every node and device against the cluster's bound pods (node
/// and GPU indices of each), the nodes inside their topology domains
/// (node labels), and the devices where a picked pending job would fit.
pub(super) async fn check_gpus(
    browser: &mut Browser,
    rpc: &mut SchedulerClient<Channel>,
    client: &kube::Client,
    cycle: u64,
) {
    let placed = placements(client).await;
    let jobs = rpc
        .list_jobs(pb::ListJobsRequest::default())
        .await
        .expect("jobs")
        .into_inner();
    // The cluster's holders per device: node → device → jobs.
    let mut holders: BTreeMap<(String, u32), BTreeSet<String>> = BTreeMap::new();
    for (pod, (node, gpus)) in &placed {
        for g in gpus {
            holders
                .entry((node.clone(), *g))
                .or_default()
                .insert(format!("{pod}:1000"));
        }
    }
    let page = browser.goto("#/gpus?job=ml/capped", cycle).await;
    assert!(page["error"].is_null(), "{page}");
    browser
        .cmd(json!({"wait": "#gpu-job option[value=\"ml/wait\"]"}))
        .await;
    let shown = browser.read("gpus").await;
    let d = &shown["data"];
    assert!(d["legend"] == true, "#gpu-legend");
    assert_eq!(d["selected"], "ml/capped", "{d}");
    // The select offers the pending jobs ListJobs has.
    let options: BTreeSet<String> = d["options"]
        .as_array()
        .expect("options")
        .iter()
        .map(s)
        .collect();
    let pending: BTreeSet<String> = jobs
        .jobs
        .iter()
        .filter(|j| j.state == pb::JobState::Pending as i32)
        .map(|j| format!("{}/{}", j.namespace, j.name))
        .collect();
    assert_eq!(options, pending, "#gpu-job's options");
    let nodes = d["nodes"].as_array().expect("nodes");
    let names: BTreeSet<String> = nodes.iter().map(|n| s(&n["node"])).collect();
    assert_eq!(
        names,
        ["n1", "n2", "n3"].map(String::from).into(),
        "every node once"
    );
    let mut fit = BTreeSet::new();
    for n in nodes {
        let node = s(&n["node"]);
        let devs = n["devices"].as_array().expect("devices");
        assert_eq!(devs.len(), 8, "{node}: 8 devices");
        // Every node is Ready and schedulable.
        assert_eq!(
            (&n["notReady"], &n["cordoned"]),
            (&json!(false), &json!(false)),
            "{node} is ready and not cordoned: {n}"
        );
        for dev in devs {
            let k = dev["device"].as_u64().expect("index") as u32;
            let shown: BTreeSet<String> = s(&dev["holders"])
                .split(',')
                .filter(|x| !x.is_empty())
                .map(String::from)
                .collect();
            let want = holders.get(&(node.clone(), k)).cloned().unwrap_or_default();
            assert_eq!(shown, want, "{node} GPU {k}: data-holders");
            if dev["fit"] == true {
                assert!(want.is_empty(), "{node} GPU {k}: fit but held");
                fit.insert((node.clone(), k));
            }
        }
        // Inside its leaf and its spine block (the node labels).
        let within: Vec<String> = n["within"]
            .as_array()
            .expect("domains")
            .iter()
            .map(|p| s(&p[1]))
            .collect();
        let leaf = if node == "n3" { "tor-2" } else { "tor-1" };
        assert!(
            within.iter().any(|w| w.contains(leaf)) && within.iter().any(|w| w.contains("b0")),
            "{node} inside {within:?}"
        );
    }
    let levels: BTreeSet<String> = d["domains"]
        .as_array()
        .expect("domains")
        .iter()
        .map(|x| s(&x["level"]))
        .collect();
    assert!(levels.len() >= 2, "two topology levels: {levels:?}");
    // ml/capped (4 GPUs) would fit on n3's six free devices (its queue's
    // limit is no node's filter); n1 and n2 are full.
    let n3_free: BTreeSet<(String, u32)> = (0..8)
        .filter(|k| !holders.contains_key(&("n3".to_string(), *k)))
        .map(|k| ("n3".to_string(), k))
        .collect();
    assert_eq!(fit, n3_free, "the devices outlined for ml/capped");
    shoot(browser, "gpus").await;
}

/// Evictions: the reclaims, as WatchDecisions told them.
pub(super) async fn check_evictions(browser: &mut Browser, victims: &[pb::Victim], cycle: u64) {
    browser.goto("#/evictions", cycle).await;
    let shown = browser.read("evictions").await;
    let rows = shown["data"].as_array().expect("rows").clone();
    assert_eq!(rows.len(), victims.len(), "{rows:?}");
    for v in victims {
        let r = rows
            .iter()
            .find(|r| s(&r["id"]).ends_with(&format!(":{}", v.pod)))
            .unwrap_or_else(|| panic!("no row for {}: {rows:?}", v.pod));
        let w = format!("{r} / {v:?}");
        assert!(s(&r["job"]).contains(&v.job), "{w}");
        assert!(s(&r["kind"]).contains(&v.kind), "{w}");
        assert_eq!(s(&r["node"]), v.node, "{w}");
        assert!(s(&r["message"]).contains(v.message.trim()), "{w}");
        assert!(s(&r["preemptor"]).contains("ml/b-big"), "{w}");
    }
    shoot(browser, "evictions").await;
}
