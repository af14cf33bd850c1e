use super::*;
use trainyard_model::dra::{
    AttrValue, CapacityPolicy, Device, DeviceCapacity, DeviceConstraint, DeviceRequest,
    SelectorMatches, SelectorSet,
};

/// One node `n` with `devices`, every device accepted by selector 0.
fn state(devices: Vec<Device>) -> DraState {
    let n = devices.len();
    let mut mask = DeviceMask::with_len(n);
    (0..n).for_each(|i| mask.insert(i));
    let nd = Arc::new(NodeDevices {
        devices,
        counter_sets: Vec::new(),
    });
    let dra = Dra {
        nodes: BTreeMap::from([("n".to_string(), nd.clone())]),
        claims: BTreeMap::new(),
        selectors: vec![SelectorSet {
            class: "c".into(),
            expressions: Vec::new(),
        }],
        matches: vec![Arc::new(SelectorMatches {
            by_node: BTreeMap::from([("n".to_string(), mask)]),
            ..SelectorMatches::default()
        })],
        backed: BTreeMap::new(),
    };
    DraState::new(
        Arc::new(DraNode::new("n", nd, &dra)),
        Arc::new(DraWorld::new(&dra)),
    )
}

fn dev(name: &str, numa: i64) -> Device {
    Device {
        driver: "d".into(),
        pool: "p".into(),
        name: name.into(),
        attributes: BTreeMap::from([("d/numa".to_string(), AttrValue::Int(numa))]),
        capacity: BTreeMap::new(),
        consumes: Vec::new(),
        taints: Vec::new(),
        multi: false,
    }
}

fn own(count: u32, constraints: Vec<DeviceConstraint>, capacity: &[(&str, u64)]) -> ClaimNeed {
    ClaimNeed::Own(Arc::new(ClaimSpec {
        requests: vec![DeviceRequest {
            name: "r".into(),
            alternatives: vec![SubRequest {
                name: "r".into(),
                class: "c".into(),
                selector: 0,
                mode: AllocationMode::ExactCount(count),
                admin_access: false,
                tolerations: Vec::new(),
                capacity: capacity.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            }],
        }],
        constraints,
    }))
}

fn picked(st: &DraState) -> Vec<Vec<u32>> {
    st.fresh
        .iter()
        .map(|f| f.picks.iter().map(|p| p.device).collect())
        .collect()
}

#[test]
fn distinct_attribute_spreads_devices_over_its_values() {
    let mut st = state(vec![dev("a", 0), dev("b", 0), dev("c", 1)]);
    let distinct = DeviceConstraint {
        requests: Vec::new(),
        attribute: "d/numa".into(),
        distinct: true,
    };
    let claim = [own(2, vec![distinct.clone()], &[])];
    assert!(st.fits(&claim));
    st.take(&claim, &[]);
    let p = &picked(&st)[0];
    assert!(p.contains(&2), "one device of each NUMA node: {p:?}");
    // Three devices with distinct NUMA nodes do not exist.
    let st = state(vec![dev("a", 0), dev("b", 0), dev("c", 1)]);
    assert!(!st.fits(&[own(3, vec![distinct], &[])]));
}

#[test]
fn a_shared_device_is_allocated_while_its_capacity_lasts() {
    let mut gpu = dev("g", 0);
    gpu.multi = true;
    gpu.capacity.insert(
        "d/memory".into(),
        DeviceCapacity {
            value: 80_000,
            policy: Some(CapacityPolicy {
                default: Some(10_000),
                valid_values: Vec::new(),
                range: Some((10_000, None, Some(10_000))),
            }),
        },
    );
    let mut st = state(vec![gpu]);
    // 25 000 is rounded up to 30 000 by the step: two fit (60 000), a
    // third does not (90 000 > 80 000), but a default-sized one does.
    let big = [own(1, Vec::new(), &[("d/memory", 25_000)])];
    st.take(&big, &[]);
    st.take(&big, &[]);
    assert!(!st.fits(&big));
    let small = [own(1, Vec::new(), &[])];
    assert!(st.fits(&small));
    assert_eq!(
        st.fresh[0].picks[0].consumed,
        [("d/memory".to_string(), 30_000)]
    );
    // Given back, the room returns.
    st.give(&big);
    assert!(st.fits(&big));
}

#[test]
fn the_search_gives_up_after_its_step_limit() {
    // 64 devices on three NUMA nodes, four devices on distinct NUMA nodes
    // asked: no solution, and the combinations to try exceed the limit.
    let devices: Vec<Device> = (0..64).map(|i| dev(&format!("x{i}"), i % 3)).collect();
    let st = state(devices);
    let distinct = DeviceConstraint {
        requests: Vec::new(),
        attribute: "d/numa".into(),
        distinct: true,
    };
    assert_eq!(
        st.miss(&[own(4, vec![distinct.clone()], &[])]),
        Some(Miss::TooManySteps)
    );
    assert!(st.fits(&[own(3, vec![distinct], &[])]));
}

#[test]
fn capacity_policies_round_up_to_a_valid_amount() {
    let p = CapacityPolicy {
        default: Some(4),
        valid_values: vec![4, 8, 16],
        range: None,
    };
    assert_eq!(p.charge(None), Some(4));
    assert_eq!(p.charge(Some(5)), Some(8));
    assert_eq!(p.charge(Some(17)), None);
    let r = CapacityPolicy {
        default: None,
        valid_values: Vec::new(),
        range: Some((10, Some(50), Some(10))),
    };
    assert_eq!(r.charge(Some(1)), Some(10));
    assert_eq!(r.charge(Some(41)), Some(50));
    assert_eq!(r.charge(Some(51)), None);
}
