use expect_test::expect;

use crate::convert::tests::three_pods;
use crate::{pb, service};

fn explain(name: &str) -> String {
    let c = three_pods();
    let r = service::explain_job(
        &c,
        &pb::ExplainJobRequest {
            namespace: "ml".into(),
            name: name.into(),
        },
    );
    match r {
        Ok(r) => format!(
            "{} {:?} pending={}\nmessage: {}\nsummary: {}\nnodes: {:?}\nto fit:\n  {}",
            r.reason,
            pb::Cause::try_from(r.cause),
            r.pending,
            r.message,
            r.summary,
            r.node_reasons
                .iter()
                .map(|n| format!("{} {}", n.nodes, n.reason))
                .collect::<Vec<_>>(),
            r.to_fit.join("\n  ")
        )
        .lines()
        .map(str::trim_end)
        .collect::<Vec<_>>()
        .join("\n"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn no_room_is_broken_down_over_nodes_as_kube_scheduler_does() {
    expect![[r#"
        Unschedulable Ok(Room) pending=true
        message: gang needs 6 × nvidia.com/gpu in 1 pod(s); 0/2 nodes fit: 1 untolerated taint dedicated=infer, 1 insufficient nvidia.com/gpu
        summary: 0/2 nodes are available: 1 insufficient nvidia.com/gpu, 1 untolerated taint dedicated=infer.
        nodes: ["1 insufficient nvidia.com/gpu", "1 untolerated taint dedicated=infer"]
        to fit:
          room for pod ml/wide: 0 of the 1 pods the gang needs were placed before it did not fit
          a toleration of taint dedicated=infer (1 nodes carry it)
          more free nvidia.com/gpu on a node (1 nodes have too little for pod ml/wide), or ask for less nvidia.com/gpu per pod"#]].assert_eq(&explain("wide"));
}

#[test]
fn a_queue_limit_says_how_far_to_raise_it() {
    expect![[r#"
        QueueAtLimit Ok(Quota) pending=true
        message: queue team at limit nvidia.com/gpu 4/10 (gang needs 8 more)
        summary:
        nodes: []
        to fit:
          queue team's limit on nvidia.com/gpu raised to at least 12 nvidia.com/gpu (now 10 nvidia.com/gpu), or 2 nvidia.com/gpu freed in it"#]].assert_eq(&explain("over"));
}

#[test]
fn a_pod_larger_than_every_node() {
    expect![[r#"
        ExceedsQueueLimit Ok(Quota) pending=true
        message: gang minimum needs 16 nvidia.com/gpu, above the limit 10 of queue team; it can never run there
        summary:
        nodes: []
        to fit:
          a minimum of at most 10 nvidia.com/gpu (the limit of queue team), or that limit raised to 16 nvidia.com/gpu"#]].assert_eq(&explain("big"));
}

#[test]
fn a_running_job_and_an_unknown_one() {
    expect![[r#"
         Ok(Unspecified) pending=false
        message: not pending: every pod the job asked for is placed
        summary:
        nodes: []
        to fit:
    "#]]
    .assert_eq(&explain("small"));
    expect!["no job ml/smal in the scheduler's latest cycle; did you mean ml/small?"]
        .assert_eq(&explain("smal"));
}
