//! `WhatIf`: the core run on a copy of the latest cycle's snapshot with a
//! job added or resized. The copy shares every unchanged value with the
//! live snapshot (`Arc`); nothing reaches the service.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::{Value, json};
use trainyard_model::{Job, ResourceName, Snapshot, TaskKey, TaskState};
use trainyard_sched::Decisions;
use trainyard_serve::view::CycleView;

use crate::{ApiError, convert, pb};

/// The live snapshot with job `r` resized, as if submitted again with
/// the new sizes (a running job's pods are taken as pending); and the
/// job's id.
pub fn resized(snapshot: &Snapshot, r: &pb::Resize) -> Result<(Snapshot, String), ApiError> {
    let id = format!("{}/{}", r.namespace, r.name);
    let Some(at) = snapshot.jobs.iter().position(|j| j.id == id) else {
        return Err(ApiError::job_not_found(snapshot, &r.namespace, &r.name));
    };
    let mut job: Job = (*snapshot.jobs[at]).clone();
    if job.tasks.is_empty() {
        return Err(ApiError::Invalid(format!("job {id} has no pods to resize")));
    }
    let old_pods = job.tasks.len();
    let pods = if r.pods == 0 {
        old_pods
    } else {
        r.pods as usize
    };
    job.tasks.truncate(pods);
    let mut i = 0;
    while job.tasks.len() < pods {
        let mut t = job.tasks[old_pods.min(job.tasks.len()) - 1].clone();
        let name = format!("{}-whatif-{i}", t.key.name);
        t.key = TaskKey {
            namespace: t.key.namespace.clone(),
            name: name.clone(),
            uid: String::new(),
        };
        t.name = format!("{}/{name}", t.key.namespace);
        t.rank = None;
        job.tasks.push(t);
        i += 1;
    }
    for t in &mut job.tasks {
        t.state = TaskState::Pending;
        t.started = None;
        t.terminating = false;
        t.nomination = None;
        if r.gpus_per_pod > 0 {
            let milli = u64::from(r.gpus_per_pod) * trainyard_model::resources::MILLI_PER_GPU;
            t.requests.set(&ResourceName::Gpu, milli);
        }
    }
    let pods_u32 = u32::try_from(pods).unwrap_or(u32::MAX);
    job.min_member = if r.min_member > 0 {
        r.min_member.min(pods_u32)
    } else if job.min_member as usize >= old_pods {
        pods_u32
    } else {
        job.min_member.min(pods_u32)
    };
    let mut copy = snapshot.clone();
    copy.jobs[at] = Arc::new(job);
    Ok((copy, id))
}

/// The objects of a what-if: their documents (a `List`'s items taken out),
/// each pod given `scheduler_name` when it names none.
pub fn documents(text: &str, scheduler_name: &str) -> Result<Vec<Value>, ApiError> {
    let source = trainyard_ingest::Source::new("<whatif>", text);
    let docs =
        trainyard_ingest::parse_documents(&source).map_err(|e| ApiError::Invalid(e.to_string()))?;
    let mut out = Vec::new();
    let mut stack: Vec<Value> = trainyard_ingest::present_documents(docs)
        .map(|(_, d)| d)
        .collect();
    stack.reverse();
    while let Some(mut d) = stack.pop() {
        if let Some(items) = d.get_mut("items").and_then(Value::as_array_mut) {
            let mut items = std::mem::take(items);
            items.reverse();
            stack.extend(items);
            continue;
        }
        if d["kind"] == "Pod" && d["spec"].is_object() && d["spec"]["schedulerName"].is_null() {
            d["spec"]["schedulerName"] = json!(scheduler_name);
        }
        out.push(d);
    }
    if !out.iter().any(|d| d["kind"] == "Pod") {
        return Err(ApiError::Invalid(
            "the what-if objects hold no Pod: give a PodGroup with its pods, or pods".into(),
        ));
    }
    Ok(out)
}

/// The live snapshot with the jobs `objects` make (read with `context`,
/// the watched objects other than pods and groups: nodes, queues,
/// priority classes, topology, DRA) in place of any of the same name; and
/// their ids.
pub fn with_objects(
    snapshot: &Snapshot,
    context: Vec<Arc<Value>>,
    objects: Vec<Value>,
    opts: &trainyard_ingest::LoadOptions,
) -> Result<(Snapshot, Vec<String>), ApiError> {
    let context: Vec<Value> = context
        .iter()
        .filter(|o| o["kind"] != "Pod" && o["kind"] != "PodGroup")
        .map(|o| (**o).clone())
        .collect();
    let list = |items: Vec<Value>| json!({"apiVersion": "v1", "kind": "List", "items": items});
    let sources = [
        trainyard_ingest::Source::new("<cluster>", list(context).to_string()),
        trainyard_ingest::Source::new("<whatif>", list(objects).to_string()),
    ];
    let loaded = trainyard_ingest::load(&sources, opts)
        .map_err(|e| ApiError::Invalid(format!("the what-if objects: {e}")))?;
    let new: Vec<Arc<Job>> = loaded.snapshot.jobs;
    let ids: BTreeSet<&str> = new.iter().map(|j| j.id.as_str()).collect();
    let mut copy = snapshot.clone();
    copy.jobs.retain(|j| !ids.contains(j.id.as_str()));
    let names = new.iter().map(|j| j.id.clone()).collect();
    copy.jobs.extend(new);
    Ok((copy, names))
}

/// The core on `copy` at the cycle's time and config: where `jobs` go,
/// whom they evict, and whose binds change against the live cycle.
pub fn run(c: &CycleView, copy: &Snapshot, jobs: &[String]) -> pb::WhatIfResponse {
    let d = trainyard_sched::schedule(copy, &c.config, c.now);
    answer(c, &d, jobs)
}

/// The response for `jobs` from the what-if's decisions `d`.
pub fn answer(c: &CycleView, d: &Decisions, jobs: &[String]) -> pb::WhatIfResponse {
    let ours = |job: &str| jobs.iter().any(|j| j == job);
    let binds: Vec<pb::Placement> = d
        .binds
        .iter()
        .filter(|b| ours(b.job.as_str()))
        .map(convert::placement)
        .collect();
    let nominations: Vec<pb::Placement> = d
        .nominations
        .iter()
        .filter(|n| ours(n.job.as_str()))
        .map(convert::nomination)
        .collect();
    let evictions = d
        .evictions
        .iter()
        .filter(|e| ours(e.preemptor.as_str()))
        .map(convert::victim)
        .collect();
    let pending = d.pending.iter().find(|p| ours(p.job.as_str()));
    let placed = |d: &Decisions| -> BTreeSet<String> {
        d.binds
            .iter()
            .filter(|b| !ours(b.job.as_str()))
            .map(|b| b.job.to_string())
            .collect()
    };
    let (live, now) = (placed(&c.decisions), placed(d));
    let displaced = live.symmetric_difference(&now).cloned().collect();
    pb::WhatIfResponse {
        cycle: Some(convert::cycle(c)),
        job: jobs.join(", "),
        fits: pending.is_none() && !(binds.is_empty() && nominations.is_empty()),
        binds,
        nominations,
        evictions,
        reason: pending
            .map(|p| p.reason.code().to_string())
            .unwrap_or_default(),
        message: pending.map(|p| p.message.clone()).unwrap_or_default(),
        reservation: pending.and_then(|p| convert::reservation(&p.reason)),
        displaced,
    }
}

#[cfg(test)]
mod tests {
    use expect_test::expect;

    use super::*;
    use crate::convert::tests::three_pods;

    fn said(r: &pb::WhatIfResponse) -> String {
        let binds: Vec<String> = r
            .binds
            .iter()
            .map(|b| format!("{} -> {} {:?}", b.pod, b.node, b.gpus))
            .collect();
        format!(
            "{} fits={} binds={binds:?} evictions={} displaced={:?} {}: {}",
            r.job,
            r.fits,
            r.evictions.len(),
            r.displaced,
            r.reason,
            r.message
        )
    }

    #[test]
    fn a_smaller_ask_fits_where_the_larger_did_not_and_nothing_live_changes() {
        let c = three_pods();
        let before = c.snapshot.jobs.clone();
        let ask = pb::Resize {
            namespace: "ml".into(),
            name: "wide".into(),
            gpus_per_pod: 2,
            ..Default::default()
        };
        let (copy, id) = resized(&c.snapshot, &ask).expect("resized");
        expect![[
            r#"ml/wide fits=true binds=["ml/wide -> n1 [4, 5]"] evictions=0 displaced=[] : "#
        ]]
        .assert_eq(&said(&run(&c, &copy, &[id])));
        assert_eq!(c.snapshot.jobs, before, "the live snapshot is unchanged");
        // Two pods of 2: the copies are named after the last pod.
        let two = pb::Resize { pods: 2, ..ask };
        let (copy, id) = resized(&c.snapshot, &two).expect("resized");
        expect![[r#"ml/wide fits=true binds=["ml/wide -> n1 [4, 5]", "ml/wide-whatif-0 -> n1 [6, 7]"] evictions=0 displaced=[] : "#]].assert_eq(&said(&run(&c, &copy, &[id])));
    }

    #[test]
    fn objects_are_read_in_the_cluster_they_would_join() {
        let c = three_pods();
        let context: Vec<Value> = trainyard_ingest::parse_documents(
            &trainyard_ingest::Source::new("c", crate::convert::tests::CLUSTER),
        )
        .expect("yaml");
        let docs = documents(
            "apiVersion: v1\nkind: Pod\nmetadata: {name: try, namespace: ml, labels: {trainyard.io/queue: team}}\nspec: {containers: [{name: c, resources: {requests: {nvidia.com/gpu: '4'}}}]}\n",
            "trainyard",
        )
        .expect("documents");
        let opts = trainyard_ingest::LoadOptions::default();
        let (copy, ids) = with_objects(
            &c.snapshot,
            context.into_iter().map(Arc::new).collect(),
            docs,
            &opts,
        )
        .expect("read");
        expect![[
            r#"ml/try fits=true binds=["ml/try -> n1 [0, 1, 2, 3]"] evictions=0 displaced=[] : "#
        ]]
        .assert_eq(&said(&run(&c, &copy, &ids)));
        let none = documents(
            "apiVersion: v1\nkind: Node\nmetadata: {name: x}\n",
            "trainyard",
        );
        expect!["the what-if objects hold no Pod: give a PodGroup with its pods, or pods"]
            .assert_eq(&none.err().map(|e| e.to_string()).unwrap_or_default());
    }
}
