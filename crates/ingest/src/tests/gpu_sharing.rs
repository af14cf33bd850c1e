use super::*;

// --- GPU-sharing annotations (docs/gpu-sharing-requests.md) ---------------

const GIB: u64 = 1 << 30;

fn gpu_node(name: &str, gpus: u32, product: &str, memory_mib: Option<&str>) -> String {
    let memory = memory_mib
        .map(|m| format!(", nvidia.com/gpu.memory: \"{m}\""))
        .unwrap_or_default();
    format!(
        "apiVersion: v1\nkind: Node\nmetadata: {{name: {name}, labels: {{nvidia.com/gpu.product: {product}{memory}}}}}\nstatus: {{allocatable: {{nvidia.com/gpu: \"{gpus}\"}}}}\n"
    )
}

/// A Trainyard pod with `annotations` (a YAML flow mapping body) and `spec`.
fn annotated_pod(name: &str, annotations: &str, spec: &str) -> String {
    pod(name, &format!("  annotations: {{{annotations}}}\n"), spec)
}

#[test]
fn gpu_sharing_annotations_set_requests_and_constraints() {
    const NO_GPU: &str = "  containers: [{name: c}]\n";
    // Pods first, nodes last: nominal shares need every node, in any order.
    let text = [
        annotated_pod("frac", "gpu-fraction: \"0.5\"", NO_GPU),
        annotated_pod("frac-one", "trainyard.io/gpu-fraction: \"1\"", NO_GPU),
        annotated_pod(
            "frac-both",
            "gpu-fraction: \"0.250\", trainyard.io/gpu-fraction: \".25\"",
            NO_GPU,
        ),
        annotated_pod("mem-kai", "gpu-memory: \"20480\"", NO_GPU),
        annotated_pod("mem-quantity", "trainyard.io/gpu-memory: 30Gi", NO_GPU),
        annotated_pod(
            "mem-both",
            "gpu-memory: \"4096\", trainyard.io/gpu-memory: 4Gi",
            NO_GPU,
        ),
        // Bound to the 40Gi node: its share is measured there, not against 80Gi.
        annotated_pod(
            "mem-bound",
            "trainyard.io/gpu-memory: 30Gi, trainyard.io/gpu-indices: \"1\"",
            "  nodeName: a100\n  containers: [{name: c}]\n",
        ),
        annotated_pod(
            "models",
            "trainyard.io/gpu-models: \"NVIDIA-H100-80GB-HBM3, NVIDIA-A100-SXM4-40GB,NVIDIA-H100-80GB-HBM3\"",
            "  containers: [{name: c, resources: {limits: {nvidia.com/gpu: 2}}}]\n",
        ),
        annotated_pod(
            "models-share",
            "trainyard.io/gpu-models: NVIDIA-A100-SXM4-40GB, gpu-fraction: \"0.125\"",
            NO_GPU,
        ),
        annotated_pod(
            "multi",
            "gpu-fraction: \"0.5\", gpu-fraction-num-devices: \"2\"",
            NO_GPU,
        ),
        // Another scheduler's bound pod holds its share on the node.
        "apiVersion: v1\nkind: Pod\nmetadata: {name: kai, namespace: ml, annotations: {gpu-memory: \"10240\"}}\nspec: {schedulerName: kai-scheduler, nodeName: h100, containers: [{name: c}]}\n".to_string(),
        gpu_node("h100", 4, "NVIDIA-H100-80GB-HBM3", Some("81920")),
        gpu_node("a100", 2, "NVIDIA-A100-SXM4-40GB", Some("40960")),
        gpu_node("old", 8, "Tesla-V100", None),
    ]
    .join("---\n");
    let loaded = load_one(&text).unwrap();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let gpu = |name: &str| task(&loaded, name).requests.gpu;
    let memory = |name: &str| task(&loaded, name).constraints.gpu_memory;

    assert_eq!((gpu("ml/frac"), memory("ml/frac")), (500, None));
    assert_eq!(gpu("ml/frac-one"), 1000, "\"1\" is one whole GPU");
    assert_eq!(gpu("ml/frac-both"), 250);
    // Nominal share against the largest device in the snapshot (80Gi).
    assert_eq!(
        (gpu("ml/mem-kai"), memory("ml/mem-kai")),
        (250, Some(20 * GIB))
    );
    assert_eq!(
        (gpu("ml/mem-quantity"), memory("ml/mem-quantity")),
        (375, Some(30 * GIB))
    );
    assert_eq!(
        (gpu("ml/mem-both"), memory("ml/mem-both")),
        (50, Some(4 * GIB))
    );
    assert_eq!(
        (gpu("ml/mem-bound"), memory("ml/mem-bound")),
        (750, Some(30 * GIB))
    );
    assert_eq!(bound_gpus(&loaded, "ml/mem-bound"), Some(vec![1]));
    let models = task(&loaded, "ml/models");
    assert_eq!(models.requests.gpu, 2000);
    assert_eq!(
        models.constraints.gpu_models,
        ["NVIDIA-A100-SXM4-40GB", "NVIDIA-H100-80GB-HBM3"]
    );
    assert_eq!(models.constraints.gpu_memory, None);
    let share = task(&loaded, "ml/models-share");
    assert_eq!(share.requests.gpu, 125);
    assert_eq!(share.constraints.gpu_models, ["NVIDIA-A100-SXM4-40GB"]);
    assert!(task(&loaded, "ml/frac").constraints.gpu_models.is_empty());
    assert!(task(&loaded, "ml/frac").constraints.unsupported.is_empty());
    assert_eq!(
        task(&loaded, "ml/multi").constraints.unsupported,
        ["gpu-fraction-num-devices=\"2\" (a GPU share spread over several devices)"]
    );
    let ext = &loaded.snapshot.external;
    assert_eq!(ext.len(), 1);
    assert_eq!((ext[0].name.as_str(), ext[0].requests.gpu), ("ml/kai", 125));
}

#[test]
fn gpu_sharing_annotation_errors_name_the_field() {
    let no_gpu = "  containers: [{name: c}]\n";
    let text = [
        annotated_pod("a", "gpu-fraction: \"0.3333\"", no_gpu),
        annotated_pod("b", "trainyard.io/gpu-fraction: \"1.5\"", no_gpu),
        annotated_pod("c", "gpu-fraction: \"0\"", no_gpu),
        annotated_pod("d", "gpu-fraction: NaN", no_gpu),
        annotated_pod("e", "gpu-fraction: \"\"", no_gpu),
        annotated_pod("f", "gpu-memory: 4Gi", no_gpu),
        annotated_pod("g", "trainyard.io/gpu-memory: \"0\"", no_gpu),
        annotated_pod("h", "gpu-fraction: \"0.5\", gpu-memory: \"4096\"", no_gpu),
        annotated_pod(
            "i",
            "gpu-fraction: \"0.5\"",
            "  containers: [{name: c}, {name: d, resources: {limits: {nvidia.com/gpu: 1}}}]\n",
        ),
        annotated_pod(
            "j",
            "gpu-fraction: \"0.25\", trainyard.io/gpu-fraction: \"0.5\"",
            no_gpu,
        ),
        annotated_pod("k", "trainyard.io/gpu-models: \"A100,,H100\"", no_gpu),
        annotated_pod("l", "trainyard.io/gpu-models: NVIDIA A100", no_gpu),
        // Inside a List, the path starts with items[i]; another scheduler's
        // pods are checked too.
        "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: m, namespace: ml, annotations: {trainyard.io/gpu-memory: 20GB}}\n  spec: {nodeName: n1, containers: [{name: c}]}\n".to_string(),
    ]
    .join("---\n");
    let fraction = "expected a decimal fraction of one GPU, greater than 0 and at most 1, such as \"0.5\" or \"0.125\"";
    let expected = [
        "document 1: Pod ml/a: metadata.annotations.gpu-fraction: \"0.3333\" has more than 3 decimal places; expected a whole number of thousandths of a GPU (milli-GPU), such as \"0.333\" (Trainyard does not round it)".to_string(),
        format!("document 2: Pod ml/b: metadata.annotations.trainyard.io/gpu-fraction: \"1.5\" is more than one GPU; {fraction} (request whole GPUs with the nvidia.com/gpu resource)"),
        format!("document 3: Pod ml/c: metadata.annotations.gpu-fraction: \"0\" is not greater than 0; {fraction}"),
        format!("document 4: Pod ml/d: metadata.annotations.gpu-fraction: \"NaN\" is not a decimal number; {fraction}"),
        format!("document 5: Pod ml/e: metadata.annotations.gpu-fraction: empty; {fraction}"),
        "document 6: Pod ml/f: metadata.annotations.gpu-memory: \"4Gi\" is not a whole number of MiB; expected a whole number of MiB greater than 0, such as \"4096\" (for a quantity such as \"4Gi\", use trainyard.io/gpu-memory)".to_string(),
        "document 7: Pod ml/g: metadata.annotations.trainyard.io/gpu-memory: \"0\" is not greater than 0; expected a memory quantity greater than 0, such as \"20Gi\" or \"4096Mi\"".to_string(),
        "document 8: Pod ml/h: metadata.annotations.gpu-memory: \"4096\" conflicts with gpu-fraction=\"0.5\"; expected either a GPU fraction or a GPU memory amount, not both".to_string(),
        "document 9: Pod ml/i: metadata.annotations.gpu-fraction: a GPU share cannot be combined with the nvidia.com/gpu resource, found spec.containers[1].resources.limits.nvidia.com/gpu=\"1\"; expected either this annotation (a share of one device) or nvidia.com/gpu (whole GPUs), not both".to_string(),
        "document 10: Pod ml/j: metadata.annotations.gpu-fraction: \"0.25\" differs from trainyard.io/gpu-fraction=\"0.5\"; expected the same amount under both keys, or only one of them".to_string(),
        "document 11: Pod ml/k: metadata.annotations.trainyard.io/gpu-models: \"A100,,H100\" has an empty entry; expected comma-separated GPU model names as the node label nvidia.com/gpu.product gives them, such as \"NVIDIA-A100-SXM4-80GB,NVIDIA-H100-80GB-HBM3\"".to_string(),
        "document 12: Pod ml/l: metadata.annotations.trainyard.io/gpu-models: \"NVIDIA A100\" is not a valid label value; expected letters, digits, '-', '_' and '.', starting and ending with a letter or digit (GPU models are matched against the node label nvidia.com/gpu.product, such as \"NVIDIA-A100-SXM4-80GB\")".to_string(),
        "document 13: Pod ml/m: items[0].metadata.annotations.trainyard.io/gpu-memory: invalid quantity \"20GB\"; expected a memory quantity greater than 0, such as \"20Gi\" or \"4096Mi\"".to_string(),
    ]
    .map(|e| format!("cluster.yaml: {e}"))
    .join("\n");
    assert_eq!(errors_of(&text), expected);
}

#[test]
fn gpu_memory_share_without_memory_info_counts_one_gpu() {
    let no_gpu = "  containers: [{name: c}]\n";
    let text = [
        gpu_node("n1", 8, "Tesla-V100", None),
        annotated_pod("pending", "gpu-memory: \"4096\"", no_gpu),
        annotated_pod(
            "bound",
            "trainyard.io/gpu-memory: 4Gi",
            "  nodeName: n1\n  containers: [{name: c}]\n",
        ),
        annotated_pod(
            "lost",
            "trainyard.io/gpu-memory: 4Gi",
            "  nodeName: gone\n  containers: [{name: c}]\n",
        ),
        // Not used, so not warned about: finished, or pending for another scheduler.
        annotated_pod(
            "done",
            "gpu-memory: \"4096\"",
            "  containers: [{name: c}]\nstatus: {phase: Succeeded}\n",
        ),
        "apiVersion: v1\nkind: Pod\nmetadata: {name: other, namespace: ml, annotations: {gpu-memory: \"4096\"}}\nspec: {containers: [{name: c}]}\n".to_string(),
    ]
    .join("---\n");
    let loaded = load_one(&text).unwrap();
    for name in ["ml/pending", "ml/bound", "ml/lost"] {
        let t = task(&loaded, name);
        assert_eq!(t.requests.gpu, 1000, "{name}");
        assert_eq!(t.constraints.gpu_memory, Some(4 * GIB), "{name}");
    }
    let tail = "the pod's nominal GPU share is taken as 1 GPU";
    assert_eq!(
        loaded.warnings,
        [
            format!(
                "cluster.yaml: document 2: Pod ml/pending: annotation gpu-memory=\"4096\": no node reports its GPU memory (node label nvidia.com/gpu.memory); {tail}"
            ),
            format!(
                "cluster.yaml: document 3: Pod ml/bound: annotation trainyard.io/gpu-memory=\"4Gi\": its node n1 does not report its GPU memory (node label nvidia.com/gpu.memory); {tail}"
            ),
            format!(
                "cluster.yaml: document 4: Pod ml/lost: annotation trainyard.io/gpu-memory=\"4Gi\": its node gone is not in the snapshot; {tail}"
            ),
            "ignored 1 pending pod(s) of other schedulers (schedulerName is not \"trainyard\"): ml/other".to_string(),
        ]
    );

    // Any node with memory information gives the nominal share, even one
    // whose devices the pod may not be able to use.
    let with_memory = format!(
        "{text}---\n{}",
        gpu_node("n2", 1, "NVIDIA-L4", Some("23034"))
    );
    let loaded = load_one(&with_memory).unwrap();
    // ceil(4096 × 1000 / 23034) = 178
    assert_eq!(task(&loaded, "ml/pending").requests.gpu, 178);
    assert_eq!(
        task(&loaded, "ml/bound").requests.gpu,
        1000,
        "n1 is still unknown"
    );
}

#[test]
fn gpu_share_indices_must_name_one_device() {
    let text = [
        annotated_pod(
            "f",
            "gpu-fraction: \"0.5\", trainyard.io/gpu-indices: \"0,1\"",
            "  nodeName: n1\n  containers: [{name: c}]\n",
        ),
        annotated_pod(
            "m",
            "gpu-memory: \"4096\", trainyard.io/gpu-indices: \"2\"",
            "  nodeName: n1\n  containers: [{name: c}]\n",
        ),
        gpu_node("n1", 4, "NVIDIA-A10", Some("23028")),
    ]
    .join("---\n");
    let loaded = load_one(&text).unwrap();
    assert_eq!(bound_gpus(&loaded, "ml/f"), None);
    assert_eq!(bound_gpus(&loaded, "ml/m"), Some(vec![2]));
    assert_eq!(
        loaded.warnings,
        [
            "cluster.yaml: document 1: Pod ml/f: annotation trainyard.io/gpu-indices=\"0,1\" names 2 GPU(s); expected 1 (the pod asks for one device with annotation gpu-fraction=\"0.5\"); the pod's devices are taken as unknown and Trainyard assigns them"
        ]
    );
}
