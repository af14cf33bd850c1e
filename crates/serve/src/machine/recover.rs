//! The bind journal at the first cycle as leader: each intent the last
//! run left open is closed, completed, or rolled back, against the world
//! as the watch listed it ([`crate::journal::resolve`]).

use trainyard_model::Timestamp;
use trainyard_store::JournalState;

use super::{Command, JournalOp, Rule, Service};
use crate::journal::Resolution;

impl Service {
    pub(super) fn recover(&mut self, now: Timestamp, out: &mut Vec<Command>) {
        // The objects the watch listed, into jobs.
        self.world.state.refresh();
        let intents = std::mem::take(&mut self.open_intents);
        for (id, rec) in intents {
            match crate::journal::resolve(&rec, self.world.state.job(&rec.gang)) {
                Resolution::Close => {
                    tracing::info!(intent = id, gang = %rec.gang, "bind journal: nothing left to do");
                    out.push(Command::Journal(JournalOp::Close(id)));
                    self.done.recovered.closed += 1;
                }
                Resolution::Complete(binds) => {
                    // The room the intent planned may have been taken while
                    // no scheduler ran (another scheduler, a DaemonSet, a
                    // pod bound by `spec.nodeName`): then the plan goes, and
                    // the core places the missing members again, as without
                    // a store.
                    let snapshot = self.world.state.snapshot();
                    if let Err(why) = super::room::fits(&snapshot, &binds) {
                        tracing::warn!(intent = id, gang = %rec.gang, "bind journal: not completing a gang bound in part when the scheduler stopped: {why}; its missing members are placed again");
                        out.push(Command::Journal(JournalOp::Close(id)));
                        self.done.recovered.replanned += 1;
                        continue;
                    }
                    tracing::warn!(intent = id, gang = %rec.gang, left = binds.len(), "bind journal: completing a gang bound in part when the scheduler stopped");
                    let d = trainyard_sched::Decisions {
                        binds,
                        ..Default::default()
                    };
                    self.world.state.assume(&d, now);
                    let writes = self.world.state.take_writes();
                    if writes.is_empty() {
                        out.push(Command::Journal(JournalOp::Close(id)));
                        continue;
                    }
                    self.units.intents.insert(id, rec.clone());
                    let unit = self.units.track(now, Some(id), false, None, writes);
                    out.push(Command::Unit(unit));
                    self.done.recovered.completed += 1;
                }
                Resolution::RollBack(evictions) => {
                    tracing::warn!(intent = id, gang = %rec.gang, bound = evictions.len(), "bind journal: rolling back a gang bound in part when the scheduler stopped");
                    let mut undoing = rec.clone();
                    undoing.state = JournalState::RollingBack;
                    out.push(Command::Journal(JournalOp::Write(id, undoing)));
                    self.rollbacks.insert(id, (evictions.len(), true));
                    for e in evictions {
                        out.push(Command::Evict {
                            rule: Rule::Journal,
                            eviction: e,
                            intent: Some(id),
                        });
                    }
                    self.done.recovered.rolled_back += 1;
                }
            }
        }
    }
}
