//! A Kubernetes Node, converted: capacity, GPU devices, taints, labels.

use super::*;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct K8sNode {
    #[serde(default, deserialize_with = "null_default")]
    pub metadata: ObjectMeta,
    #[serde(default, deserialize_with = "null_default")]
    spec: NodeSpec,
    #[serde(default, deserialize_with = "null_default")]
    status: NodeStatus,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct NodeSpec {
    #[serde(default, deserialize_with = "null_default")]
    taints: Vec<K8sTaint>,
    #[serde(default, deserialize_with = "null_default")]
    unschedulable: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct K8sTaint {
    #[serde(default, deserialize_with = "null_default")]
    key: String,
    #[serde(default, deserialize_with = "null_default")]
    value: String,
    effect: Effect,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct NodeStatus {
    #[serde(default, deserialize_with = "null_default")]
    allocatable: BTreeMap<String, RawQuantity>,
}

impl K8sNode {
    /// Converts to the model. Errors are (field, message); warnings are
    /// plain messages about this node.
    pub(crate) fn convert(self, warnings: &mut Vec<String>) -> Result<Node, Vec<FieldError>> {
        let mut errors = Vec::new();
        let name = self.metadata.name.clone();
        if name.is_empty() {
            errors.push((
                "metadata.name".to_string(),
                "missing; every Node needs a name".to_string(),
            ));
        }
        let mut allocatable = Resources::zero();
        let mut max_pods = None;
        let mut gpu_count = 0u32;
        for (res, raw) in &self.status.allocatable {
            let field = format!("status.allocatable.{res}");
            let q = match raw.parse() {
                Ok(q) => q,
                Err(e) => {
                    errors.push((field, e.to_string()));
                    continue;
                }
            };
            match res.as_str() {
                "pods" => match q.to_whole_units().map(u32::try_from) {
                    Ok(Ok(n)) => max_pods = Some(n),
                    Ok(Err(_)) => errors.push((
                        field,
                        format!("{q} pods is too many; expected at most {}", u32::MAX),
                    )),
                    Err(e) => errors.push((field, e.to_string())),
                },
                GPU_RESOURCE => match q.to_whole_units() {
                    Ok(n) if n <= MAX_NODE_GPUS => {
                        // At most MAX_NODE_GPUS, so both conversions are exact.
                        gpu_count = n as u32;
                        allocatable.gpu = n * 1000;
                    }
                    Ok(n) => errors.push((field, too_many_gpus(&n.to_string()))),
                    Err(QuantityError::Overflow(text)) => {
                        errors.push((field, too_many_gpus(&text)));
                    }
                    Err(e) => errors.push((field, format!("{e} of GPU devices"))),
                },
                other => {
                    let rn = ResourceName::parse(other);
                    match q.to_resource_units(&rn) {
                        Ok(v) => allocatable.set(&rn, v),
                        Err(e) => errors.push((field, e.to_string())),
                    }
                }
            }
        }
        let model = self
            .metadata
            .labels
            .get(keys::NODE_GPU_PRODUCT)
            .cloned()
            .unwrap_or_default();
        let memory_bytes = match self.metadata.labels.get(keys::NODE_GPU_MEMORY_MIB) {
            None => 0,
            Some(v) => match v
                .trim()
                .parse::<u64>()
                .ok()
                .and_then(|mib| mib.checked_mul(1 << 20))
            {
                Some(b) => b,
                None => {
                    warnings.push(format!(
                        "Node {name}: label {}={v:?} is not a whole number of MiB; GPU memory taken as unknown",
                        keys::NODE_GPU_MEMORY_MIB
                    ));
                    0
                }
            },
        };
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(Node {
            name,
            allocatable,
            max_pods,
            labels: self.metadata.labels,
            taints: self
                .spec
                .taints
                .into_iter()
                .map(|t| Taint {
                    key: t.key,
                    value: t.value,
                    effect: t.effect.0,
                })
                .collect(),
            unschedulable: self.spec.unschedulable,
            gpus: (0..gpu_count)
                .map(|index| GpuDevice {
                    index,
                    model: model.clone(),
                    memory_bytes,
                })
                .collect(),
        })
    }
}

fn too_many_gpus(got: &str) -> String {
    format!("expected at most {MAX_NODE_GPUS} GPUs per node, got {got}")
}
