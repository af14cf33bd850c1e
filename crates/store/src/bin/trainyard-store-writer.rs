//! A writer for the store's crash tests (`tests/crash.rs`): commits
//! batches numbered from START and prints each number once its commit has
//! returned, until killed or COUNT commits are done.
//!
//! Usage: trainyard-store-writer BACKEND PATH START COUNT
//!
//! Batch `i` writes, in one commit: usage bucket `q/""/i` (`gpu` = i), gang record `g{i}` (enqueued at i), journal intent `i`, and closes
//! intent `i - 1`. So after any crash the store must hold, for some `n`,
//! exactly buckets and gangs `0..=n` and one intent, `n`.

use std::io::Write;
use std::process::ExitCode;

use trainyard_store::{
    Batch, GangRecord, JournalRecord, JournalState, Records, UsageKey, UsageRecord,
};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let [_, backend, path, start, count] = args.as_slice() else {
        eprintln!("usage: trainyard-store-writer BACKEND PATH START COUNT");
        return ExitCode::from(2);
    };
    let (Ok(backend), Ok(start), Ok(count)) =
        (backend.parse(), start.parse::<u64>(), count.parse::<u64>())
    else {
        eprintln!("trainyard-store-writer: BACKEND is redb or sled; START and COUNT are numbers");
        return ExitCode::from(2);
    };
    let mut store = match trainyard_store::open(std::path::Path::new(path), backend) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("trainyard-store-writer: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut out = std::io::stdout().lock();
    for i in start..start + count {
        let mut b = Batch::default();
        let key = UsageKey {
            queue: "q".into(),
            user: String::new(),
            start_s: i as i64,
        };
        let rec = UsageRecord {
            width_s: 1,
            gpu: u128::from(i),
            ..UsageRecord::default()
        };
        if let Err(e) = b.usage(&key, &rec) {
            eprintln!("trainyard-store-writer: {e}");
            return ExitCode::FAILURE;
        }
        b.gang(
            &format!("g{i}"),
            &GangRecord {
                enqueued_s: i as i64,
                ..GangRecord::default()
            },
        );
        b.intent(
            i,
            &JournalRecord {
                gang: format!("g{i}"),
                opened_s: i as i64,
                binds: Vec::new(),
                state: JournalState::Open,
            },
        );
        if i > 0 {
            b.close_intent(i - 1);
        }
        if let Err(e) = store.apply(&b) {
            eprintln!("trainyard-store-writer: {e}");
            return ExitCode::FAILURE;
        }
        if writeln!(out, "{i}").and_then(|()| out.flush()).is_err() {
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}
