use super::*;
use trainyard_model::GpuDevice;

fn gpu_node(name: &str, gpus: u32) -> Node {
    let mut n = Node::new(name, 96_000, 1 << 40, gpus);
    for d in &mut n.gpus {
        *d = GpuDevice {
            index: d.index,
            model: "NVIDIA-H100-80GB-HBM3".into(),
            memory_bytes: 80 << 30,
        };
    }
    n
}

#[test]
fn publishes_gpus_and_nics_of_the_named_nodes_only() {
    let mut dra_node = gpu_node("a", 8);
    let how = DraPublish {
        nics: 4,
        ..DraPublish::default()
    };
    dra_node.labels = how.labels();
    let nodes = vec![Arc::new(dra_node), Arc::new(gpu_node("b", 8))];
    let p = publish(&nodes, &DraPublish::from_labels);
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
    // The DRA node serves nvidia.com/gpu from its 8 devices, one GPU slot
    // per device (`Dra::with_extended`), named as the devices' product;
    // the other keeps its device-plugin GPUs.
    assert_eq!(p.nodes[0].gpus.len(), 8);
    assert!(
        p.nodes[0]
            .gpus
            .iter()
            .all(|g| g.model == "NVIDIA-H100-80GB-HBM3")
    );
    assert_eq!(p.nodes[0].allocatable.gpu, 8000);
    assert_eq!(p.nodes[1].gpus.len(), 8);
    assert_eq!(p.nodes[1].allocatable.gpu, 8000);
    let devices = &p.dra.nodes["a"].devices;
    assert_eq!(devices.len(), 12);
    assert!(!p.dra.nodes.contains_key("b"));
    assert_eq!(p.dra.backed.keys().collect::<Vec<_>>(), ["a"]);
    assert_eq!(p.dra.backed["a"][0].devices, 8);
    let gpu = devices
        .iter()
        .find(|d| &*d.name == "gpu-3")
        .expect("gpu-3 published");
    assert_eq!(
        gpu.attribute("gpu.nvidia.com/productName"),
        Some(&trainyard_model::dra::AttrValue::String(
            "NVIDIA-H100-80GB-HBM3".into()
        ))
    );
    assert_eq!(
        gpu.attribute(PCIE_ROOT),
        Some(&trainyard_model::dra::AttrValue::String("pci1".into()))
    );
    // 4 NICs over the 4 roots of 8 GPUs: NIC 1 beside GPUs 2 and 3.
    let nic = devices
        .iter()
        .find(|d| &*d.name == "nic-1")
        .expect("nic-1 published");
    assert_eq!(gpu.attribute(PCIE_ROOT), nic.attribute(PCIE_ROOT));
    // Idempotent: publishing the result's extended allocatable again
    // changes nothing.
    assert_eq!(p.dra.with_extended(&p.nodes), p.nodes);
}

#[test]
fn labels_round_trip() {
    let how = DraPublish {
        gpus: false,
        nics: 8,
        gpu_driver: "gpu.example.com".into(),
        nic_driver: "dra.net".into(),
    };
    let mut n = gpu_node("a", 8);
    n.labels = how.labels();
    assert_eq!(
        DraPublish::from_labels(&n),
        Some(DraPublish {
            gpu_driver: DEFAULT_GPU_DRIVER.into(),
            ..how
        })
    );
    n.labels.clear();
    assert_eq!(DraPublish::from_labels(&n), None);
    n.labels = DraPublish::default().labels();
    assert_eq!(DraPublish::from_labels(&n), Some(DraPublish::default()));
}
