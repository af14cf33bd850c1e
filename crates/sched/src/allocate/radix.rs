//! Sorting many victim units by their packed keys: a least-significant-
//! digit radix sort over the key's bytes, skipping the bytes every key
//! shares (most of them: a few priorities, one pod count, jobs numbered
//! from zero). A comparison sort of 50,000 keys spent about 800
//! instructions per key; this spends a few dozen.

/// A unit's packed key (see `Unit::packed_key`) and its position.
pub(super) type Keyed = (u128, u64, u32);

/// Sorts by `(high, low)`, stably (equal keys keep their input order).
pub(super) fn sort_stable(keys: &mut Vec<Keyed>) {
    let Some(first) = keys.first().copied() else {
        return;
    };
    if keys.len() < 64 {
        keys.sort_by_key(|k| (k.0, k.1));
        return;
    }
    // The key as three words, least significant first.
    let words = |k: &Keyed| [k.1, k.0 as u64, (k.0 >> 64) as u64];
    // The bits where some key differs from the first: a byte with none
    // orders nothing and costs no pass.
    let base = words(&first);
    let mut differs = [0u64; 3];
    for k in keys.iter() {
        let w = words(k);
        for i in 0..3 {
            differs[i] |= w[i] ^ base[i];
        }
    }
    let mut from = std::mem::take(keys);
    let mut to: Vec<Keyed> = vec![(0, 0, 0); from.len()];
    for (word, bits) in differs.iter().enumerate() {
        for byte in 0..8 {
            let shift = 8 * byte;
            if (bits >> shift) & 0xff == 0 {
                continue;
            }
            let digit = |k: &Keyed| ((words(k)[word] >> shift) & 0xff) as usize;
            let mut start = [0usize; 256];
            for k in &from {
                start[digit(k)] += 1;
            }
            let mut sum = 0;
            for s in start.iter_mut() {
                let count = *s;
                *s = sum;
                sum += count;
            }
            for k in &from {
                let b = digit(k);
                if let Some(slot) = to.get_mut(start[b]) {
                    *slot = *k;
                }
                start[b] += 1;
            }
            std::mem::swap(&mut from, &mut to);
        }
    }
    *keys = from;
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn key() -> impl Strategy<Value = Keyed> {
        (
            prop_oneof![
                any::<u128>(),
                (0u128..4).prop_map(|p| p << 95),
                Just(7u128 << 94)
            ],
            prop_oneof![any::<u64>(), 0u64..300],
            any::<u32>(),
        )
    }

    proptest! {
        #[test]
        fn sorts_as_a_stable_comparison_sort(mut keys in proptest::collection::vec(key(), 0..400)) {
            // Positions in input order, so stability shows.
            for (i, k) in keys.iter_mut().enumerate() {
                k.2 = i as u32;
            }
            let mut want = keys.clone();
            want.sort_by_key(|k| (k.0, k.1));
            sort_stable(&mut keys);
            prop_assert_eq!(keys, want);
        }
    }
}
