//! Kill a writing process at random points, reopen, check: nothing that
//! was committed is lost, and no commit is half there.
//!
//! The writer (`src/bin/trainyard-store-writer.rs`) prints each batch
//! number after its commit returned. Batch `i` writes usage bucket `i`,
//! gang `g{i}` and intent `i`, and closes intent `i - 1`. After a kill the
//! store must hold, for some `n` at least the last number printed,
//! exactly buckets and gangs `0..=n` and the one intent `n`.
//!
//! A killed process is not a power cut: the kernel still writes out what
//! the process handed it. That the engines survive a power cut is their
//! own claim (redb: fsync at commit; sled: `flush`), not tested here.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use trainyard_store::{Backend, Records};

/// Checks the store after a kill; returns the last batch it holds.
fn check(path: &std::path::Path, b: Backend, printed: Option<u64>) -> Option<u64> {
    let s = match trainyard_store::open(path, b) {
        Ok(s) => s,
        Err(e) => panic!("{b:?}: cannot reopen after a kill: {e}"),
    };
    let usage = s.usage(None).unwrap();
    let gangs = s.gangs().unwrap();
    let journal = s.journal().unwrap();
    let n = usage.len() as u64;
    for (i, (k, r)) in usage.iter().enumerate() {
        assert_eq!(k.start_s, i as i64, "{b:?}: buckets 0..{n} with no hole");
        assert_eq!(r.gpu, i as u128, "{b:?}: bucket {i}");
    }
    assert_eq!(
        gangs.len() as u64,
        n,
        "{b:?}: one gang per bucket (atomic batches)"
    );
    for i in 0..n {
        assert_eq!(gangs[&format!("g{i}")].enqueued_s, i as i64, "{b:?}");
    }
    let last = n.checked_sub(1);
    if let Some(p) = printed {
        assert!(
            last.is_some_and(|l| l >= p),
            "{b:?}: batch {p} was committed but the store ends at {last:?}"
        );
    }
    let open: Vec<u64> = journal.keys().copied().collect();
    assert_eq!(
        open,
        last.into_iter().collect::<Vec<_>>(),
        "{b:?}: exactly the last intent is open"
    );
    last
}

#[test]
fn killing_the_writer_anywhere_loses_no_commit_and_splits_none() {
    let exe = env!("CARGO_BIN_EXE_trainyard-store-writer");
    let mut rng = ChaCha8Rng::seed_from_u64(1818);
    for b in [Backend::Redb, Backend::Sled] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(format!("state.{}", b.name()));
        let mut next = 0u64;
        let mut kills = 0;
        for _round in 0..15 {
            let mut child = Command::new(exe)
                .args([
                    b.name(),
                    path.to_str().unwrap(),
                    &next.to_string(),
                    "100000",
                ])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            let stdout = child.stdout.take().unwrap();
            let mut lines = BufReader::new(stdout).lines();
            // Kill after a random number of confirmed commits (0: while it
            // opens the store or makes its first commit).
            let wait_for = rng.random_range(0..40u64);
            let mut printed = None;
            for _ in 0..wait_for {
                match lines.next() {
                    Some(Ok(l)) => printed = Some(l.parse::<u64>().unwrap()),
                    _ => break,
                }
            }
            child.kill().unwrap();
            let status = child.wait().unwrap();
            // Lines printed between the last read and the kill also count.
            for l in lines.map_while(Result::ok) {
                printed = Some(l.parse::<u64>().unwrap());
            }
            if !status.success() {
                kills += 1;
            }
            let last = check(&path, b, printed);
            next = last.map_or(0, |l| l + 1);
        }
        assert!(
            kills >= 10,
            "{b:?}: the writer was killed only {kills} times"
        );
        assert!(next > 0, "{b:?}: nothing was ever committed");
    }
}
