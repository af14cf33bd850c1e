//! The loader's tests, by topic; shared helpers here.

use super::*;
use expect_test::expect;
use std::sync::Arc;
use trainyard_model::{
    LabelSelectorOperator, ResourceName, TaintEffect, TaskState, Timestamp, TolerationOperator,
    TopologyConstraint,
};

mod documents;
mod dra;
mod errors;
mod gpu_sharing;
mod pod_rules;
mod preemption;
mod topology;
mod usable_queues;

fn load_one(text: &str) -> Result<Loaded, LoadErrors> {
    load(
        &[Source::new("cluster.yaml", text)],
        &LoadOptions::default(),
    )
}

fn errors_of(text: &str) -> String {
    match load_one(text) {
        Ok(l) => panic!("expected errors, got {:?}", l.warnings),
        Err(e) => e.to_string(),
    }
}

fn pod(name: &str, extra_meta: &str, spec: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: ml\n{extra_meta}spec:\n  schedulerName: trainyard\n{spec}"
    )
}

fn warnings_of(text: &str) -> Vec<String> {
    match load_one(text) {
        Ok(l) => l.warnings,
        Err(e) => panic!("expected no errors, got:\n{e}"),
    }
}

const PG_HEAD: &str = "apiVersion: trainyard.io/v1alpha1\nkind: PodGroup\n";

fn bound_gpus(loaded: &Loaded, task: &str) -> Option<Vec<u32>> {
    let t = loaded
        .snapshot
        .jobs
        .iter()
        .flat_map(|j| &j.tasks)
        .find(|t| t.name == task)
        .unwrap();
    match &t.state {
        TaskState::Bound { gpus, .. } => gpus.clone(),
        TaskState::Pending => panic!("{task} is pending"),
    }
}

fn task<'a>(loaded: &'a Loaded, name: &str) -> &'a trainyard_model::Task {
    loaded
        .snapshot
        .jobs
        .iter()
        .flat_map(|j| &j.tasks)
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("no task {name}"))
}

fn job<'a>(loaded: &'a Loaded, id: &str) -> &'a trainyard_model::Job {
    loaded
        .snapshot
        .jobs
        .iter()
        .find(|j| j.id == id)
        .unwrap_or_else(|| panic!("no job {id}"))
}
