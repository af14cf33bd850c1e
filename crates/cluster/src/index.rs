//! Finding a task of a job by its key without a linear search and without
//! copying keys: (hash of the key, position), sorted by hash. A lookup
//! checks the key itself, so a collision costs a comparison, never a wrong
//! answer.

use trainyard_model::{Job, TaskKey};

#[derive(Clone, Debug, Default)]
pub(crate) struct TaskIndex(Vec<(u64, u32)>);

/// FNV-1a over the key's parts, each ended by a zero byte.
fn hash(key: &TaskKey) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for part in [&key.namespace, &key.name, &key.uid] {
        for b in part.bytes().chain([0u8]) {
            h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

impl TaskIndex {
    pub(crate) fn of(job: &Job) -> TaskIndex {
        let mut v: Vec<(u64, u32)> = job
            .tasks
            .iter()
            .enumerate()
            // A job has far fewer than 2^32 tasks (the loader caps them).
            .map(|(i, t)| (hash(&t.key), i as u32))
            .collect();
        v.sort_unstable();
        TaskIndex(v)
    }

    /// The position of the task of `job` with `key` (the index must be of
    /// this job, or of a view of it: views never add or remove tasks).
    pub(crate) fn get(&self, job: &Job, key: &TaskKey) -> Option<usize> {
        let h = hash(key);
        let start = self.0.partition_point(|(x, _)| *x < h);
        self.0[start..]
            .iter()
            .take_while(|(x, _)| *x == h)
            .map(|(_, i)| *i as usize)
            .find(|&i| job.tasks.get(i).is_some_and(|t| t.key == *key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use trainyard_model::Resources;

    #[test]
    fn finds_every_task_and_nothing_else() {
        let job = Job::gang("ns/j", "q", vec![Resources::zero(); 40]);
        let idx = TaskIndex::of(&job);
        for (i, t) in job.tasks.iter().enumerate() {
            assert_eq!(idx.get(&job, &t.key), Some(i));
        }
        assert_eq!(idx.get(&job, &TaskKey::named("ns/j-40")), None);
        let mut other = job.tasks[3].key.clone();
        other.uid = "u".into();
        assert_eq!(idx.get(&job, &other), None);
    }
}
