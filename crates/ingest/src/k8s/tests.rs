use super::*;

#[test]
fn gpu_indices() {
    assert_eq!(parse_gpu_indices("0,1,2,3"), Ok(vec![0, 1, 2, 3]));
    assert_eq!(parse_gpu_indices(" 3, 1 "), Ok(vec![3, 1]));
    assert_eq!(parse_gpu_indices("1,1"), Ok(vec![1, 1]));
    assert_eq!(
        parse_gpu_indices("0,x").unwrap_err(),
        "\"0,x\" is not a list of GPU indices; expected comma-separated device indices such as \"0,1,2,3\""
    );
    assert!(parse_gpu_indices("-1").is_err());
    assert!(parse_gpu_indices("0,,1").is_err());
}

#[test]
fn gpu_indices_must_match_the_request() {
    assert_eq!(gpu_indices_problem(&[0, 1, 2, 3], 4000, None), None);
    assert_eq!(gpu_indices_problem(&[5], 500, None), None);
    assert_eq!(gpu_indices_problem(&[], 0, None), None);
    assert_eq!(
        gpu_indices_problem(&[0, 1], 4000, None).as_deref(),
        Some("names 2 GPU(s); expected 4 (the pod requests nvidia.com/gpu 4)")
    );
    assert_eq!(
        gpu_indices_problem(&[0, 1], 500, None).as_deref(),
        Some(
            "names 2 GPU(s); expected 1 (the pod requests nvidia.com/gpu 0.5, a share of one device)"
        )
    );
    assert_eq!(
        gpu_indices_problem(&[0, 1], 1500, None).as_deref(),
        Some(
            "names 2 GPU(s); expected 1 (the pod requests nvidia.com/gpu 1.5, not a whole number of GPUs)"
        )
    );
    assert_eq!(
        gpu_indices_problem(&[3], 0, None).as_deref(),
        Some("names 1 GPU(s); expected none (the pod requests no nvidia.com/gpu)")
    );
    assert_eq!(
        gpu_indices_problem(&[1, 1], 2000, None).as_deref(),
        Some("lists GPU 1 twice; expected distinct indices")
    );
    let share = Some("gpu-memory=\"4096\"");
    assert_eq!(gpu_indices_problem(&[3], 0, share), None);
    assert_eq!(gpu_indices_problem(&[3], 1000, share), None);
    assert_eq!(
        gpu_indices_problem(&[0, 1], 0, share).as_deref(),
        Some(
            "names 2 GPU(s); expected 1 (the pod asks for one device with annotation gpu-memory=\"4096\")"
        )
    );
}

#[test]
fn limits_fill_absent_requests() {
    let c: Container = serde_json::from_value(serde_json::json!({
        "resources": {"limits": {"cpu": "2", "nvidia.com/gpu": 1}, "requests": {"cpu": "500m"}}
    }))
    .unwrap();
    let mut errs = Vec::new();
    let r = container_requests(&c, "spec.containers[0]", &mut errs);
    assert!(errs.is_empty());
    assert_eq!((r.cpu, r.gpu), (500, 1000));
}
