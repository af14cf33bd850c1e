//! The machine's side of the upstream `scheduling.k8s.io` PodGroups: their
//! objects and pods kept from the watch, and each cycle's status writes
//! for the groups that are Trainyard's ([`crate::upstream_status`]).

use trainyard_model::Timestamp;

use super::{Command, Service, StatusKind};
use crate::upstream_status::{self, Group};
use crate::world::WorldEvent;

impl Service {
    /// Keeps the upstream groups and the pods that name them.
    pub(super) fn watch_upstream(&mut self, e: &WorldEvent) {
        let up = &mut self.upstream;
        if let Some(p) = self.streams.pod.filter(|_| self.streams.upstream.is_some()) {
            let pods = &mut up.pods;
            match e {
                WorldEvent::ListStart { stream } if *stream == p => pods.list_start(),
                WorldEvent::ListDone { stream } if *stream == p => pods.list_done(),
                WorldEvent::Applied { stream, object } if *stream == p => {
                    pods.applied(object, &self.live.scheduler_name)
                }
                WorldEvent::Deleted { stream, object } if *stream == p => pods.deleted(object),
                _ => {}
            }
        }
        if let Some(g) = self.streams.upstream_group {
            let groups = &mut up.groups;
            match e {
                WorldEvent::ListStart { stream } if *stream == g => groups.list_start(),
                WorldEvent::ListDone { stream } if *stream == g => groups.list_done(),
                WorldEvent::Applied { stream, object } if *stream == g => groups.applied(object),
                WorldEvent::Deleted { stream, object } if *stream == g => groups.deleted(object),
                _ => {}
            }
        }
    }

    /// The conditions of the upstream groups that are Trainyard's, as
    /// merge patches of their status.
    pub(super) fn upstream_statuses(
        &mut self,
        snapshot: &trainyard_model::Snapshot,
        decisions: &trainyard_sched::Decisions,
        now: Timestamp,
        out: &mut Vec<Command>,
    ) {
        let Some(version) = self.streams.upstream else {
            return;
        };
        if self.streams.upstream_group.is_none() {
            return;
        }
        let at = crate::report::rfc3339(now);
        let up = &mut self.upstream;
        upstream_status::note_evictions(
            &mut up.disrupted,
            &decisions.evictions,
            &up.groups.groups,
            now.0,
        );
        let groups = &up.groups.groups;
        up.disrupted.retain(|id, _| groups.contains_key(id));
        let members = up.pods.members();
        let jobs: std::collections::BTreeMap<&str, u32> = snapshot
            .jobs
            .iter()
            .filter(|j| groups.contains_key(j.id.as_str()))
            .map(|j| (j.id.as_str(), j.min_member))
            .collect();
        let pending: std::collections::BTreeMap<&str, (&str, &str)> = decisions
            .pending
            .iter()
            .filter(|p| groups.contains_key(p.job.as_str()))
            .map(|p| (p.job.as_str(), (p.reason.code(), p.message.as_str())))
            .collect();
        let none = upstream_status::Members::default();
        let mut changes = Vec::new();
        let mut rebound = Vec::new();
        let mut mine = std::collections::BTreeSet::new();
        for (id, seen) in groups {
            let m = members.get(id.as_str());
            let job = jobs.get(id.as_str()).copied();
            if !upstream_status::is_ours(m, job.is_some()) {
                continue;
            }
            mine.insert(id.clone());
            let before = up.cache.before(version, id, &seen.conditions);
            let g = Group {
                min: job.unwrap_or(seen.min_count),
                members: m.unwrap_or(&none),
                pending: pending.get(id.as_str()).copied(),
                disrupted: up.disrupted.get(id),
                before: &before,
            };
            let wanted = upstream_status::wanted(version, &g);
            if wanted
                .disruption
                .as_ref()
                .is_some_and(|c| c["status"] == "False")
            {
                rebound.push(id.clone());
            }
            if let Some(patch) = up.cache.change(version, id, wanted, seen, &at) {
                changes.push((id.clone(), patch));
            }
        }
        for id in rebound {
            up.disrupted.remove(&id);
        }
        up.cache.retain(|id| mine.contains(id));
        self.done.upstream_statuses += changes.len() as u64;
        if !changes.is_empty() {
            out.push(Command::Statuses {
                kind: StatusKind::UpstreamPodGroup,
                changes,
            });
        }
    }
}
