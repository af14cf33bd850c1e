//! Pod and node label/annotation keys Trainyard reads and writes, and the
//! keys of other schedulers it accepts.

// --- Trainyard's own keys -------------------------------------------------

/// Label or annotation on a pod: name of its PodGroup in the pod's namespace.
pub const POD_GROUP: &str = "trainyard.io/pod-group";
/// Label or annotation on a pod: the queue its job is submitted to.
pub const QUEUE: &str = "trainyard.io/queue";
/// Label or annotation on a pod: the sub-group of its PodGroup it belongs to.
pub const SUB_GROUP: &str = "trainyard.io/sub-group";
/// Annotation written by Trainyard when it binds a pod: the GPU device
/// indices the pod holds, comma-separated (`0,1,2,3`).
pub const GPU_INDICES: &str = "trainyard.io/gpu-indices";
/// Annotation on a pod: a share of one GPU device as a decimal fraction in
/// (0, 1] with at most 3 decimals, e.g. `0.5` (see [`crate::gpu`]).
pub const GPU_FRACTION: &str = "trainyard.io/gpu-fraction";
/// Annotation on a pod: a share of one GPU device sized by device memory,
/// as a Kubernetes quantity, e.g. `20Gi` (see [`crate::gpu`]).
pub const GPU_MEMORY: &str = "trainyard.io/gpu-memory";
/// Annotation on a pod: the GPU models it may use, comma-separated, as the
/// node label [`NODE_GPU_PRODUCT`] names them (see [`crate::gpu`]).
pub const GPU_MODELS: &str = "trainyard.io/gpu-models";
/// Label or annotation on a pod: its rank in the gang (a whole number,
/// `0` first). Neighbouring ranks are placed close together.
pub const RANK: &str = "trainyard.io/rank";
/// Label or annotation on a PodGroup or on the pods of a gang: `"true"` or
/// `"false"`, whether reclaim and preemption may evict the job (see
/// [`crate::preemption`]). The PodGroup's `spec.preemptible` comes first.
pub const PREEMPTIBLE: &str = "trainyard.io/preemptible";
/// Scheduling gate (`spec.schedulingGates[].name`) the service removes
/// when the pod's queue has room for its job (queue-admission gating,
/// `service.admissionGating`). Pods are created with it.
pub const ADMISSION_GATE: &str = "trainyard.io/admission";
/// Annotation on a pending pod with `status.nominatedNodeName`: when the
/// nomination was made, RFC 3339 (e.g. `2026-11-22T10:00:00Z`).
pub const NOMINATED_AT: &str = "trainyard.io/nominated-at";
/// Label on a Namespace: the queue of the PodGroups `trainyard serve`
/// infers from owners (a PyTorchJob, a JobSet, ...) in that namespace when
/// neither the pod nor any of its owners names one with [`QUEUE`] (or
/// [`KAI_QUEUE`]).
pub const NAMESPACE_DEFAULT_QUEUE: &str = "trainyard.io/default-queue";

// --- Foreign keys we accept ----------------------------------------------
//
// Each is the peer's own constant, checked against its source (the file
// is named on each key; docs/snapshot.md lists them with their sources).

/// Volcano: annotation naming the pod's PodGroup, the one its scheduler
/// reads (`KubeGroupNameAnnotationKey`, volcano-sh/apis
/// `pkg/apis/scheduling/v1beta1/labels.go`; read in volcano-sh/volcano
/// `pkg/scheduler/api/job_info.go`).
pub const VOLCANO_GROUP_NAME: &str = "scheduling.k8s.io/group-name";
/// Volcano: label and annotation its Job controller puts on a Job's pods,
/// naming the Job's queue (`QueueNameKey`, volcano-sh/apis
/// `pkg/apis/batch/v1alpha1/labels.go`; set in volcano-sh/volcano
/// `pkg/controllers/job/job_controller_util.go`).
pub const VOLCANO_QUEUE_NAME: &str = "volcano.sh/queue-name";
/// Volcano: annotation naming the queue of a pod that no Volcano Job owns
/// (its PodGroup controller reads it from the pod, volcano-sh/volcano
/// `pkg/controllers/podgroup/pg_controller_handler.go`) and, on a
/// Namespace, the queue of its PodGroups that name none (its webhook,
/// `pkg/webhooks/admission/podgroups/mutate/mutate_podgroup.go`)
/// (`QueueNameAnnotationKey`, volcano-sh/apis
/// `pkg/apis/scheduling/v1beta1/labels.go`).
pub const VOLCANO_QUEUE_ANNOTATION: &str = "scheduling.volcano.sh/queue-name";
/// Volcano: annotation (or label) on a pod or PodGroup, `"true"` or
/// `"false"`: whether the job may be evicted. Read after [`PREEMPTIBLE`]
/// (`PodPreemptable`, volcano-sh/apis
/// `pkg/apis/scheduling/v1beta1/labels.go`).
pub const VOLCANO_PREEMPTABLE: &str = "volcano.sh/preemptable";
/// scheduler-plugins coscheduling: label naming the pod's PodGroup
/// (`PodGroupLabel`, kubernetes-sigs/scheduler-plugins
/// `apis/scheduling/v1alpha1/types.go`).
pub const COSCHEDULING_POD_GROUP: &str = "scheduling.x-k8s.io/pod-group";
/// KAI scheduler: label naming the pod's queue, on the pod or its top
/// owner (`DefaultQueueLabel`, the default of KAI's configurable
/// `queueLabelKey`, NVIDIA/KAI-Scheduler `pkg/common/constants/constants.go`;
/// read in `pkg/podgrouper/podgrouper/plugins/defaultgrouper/default_grouper.go`).
/// Trainyard reads it from the pod.
pub const KAI_QUEUE: &str = "kai.scheduler/queue";
/// KAI scheduler: annotation naming the pod's PodGroup
/// (`PodGroupAnnotationForPod`, NVIDIA/KAI-Scheduler
/// `pkg/common/constants/constants.go`).
pub const KAI_POD_GROUP_NAME: &str = "pod-group-name";
/// KAI scheduler: annotation asking for a share of one GPU device as a
/// decimal fraction, e.g. `0.5`. Same meaning as [`GPU_FRACTION`]
/// (`GpuFraction`, NVIDIA/KAI-Scheduler `pkg/common/constants/constants.go`).
pub const KAI_GPU_FRACTION: &str = "gpu-fraction";
/// KAI scheduler: annotation asking for a share of one GPU device sized by
/// device memory, in MiB (digits only), e.g. `4096`. Same meaning as
/// [`GPU_MEMORY`], in other units (`GpuMemory`, NVIDIA/KAI-Scheduler
/// `pkg/common/constants/constants.go`; MiB per its `docs/gpu-sharing/README.md`).
pub const KAI_GPU_MEMORY_MIB: &str = "gpu-memory";
/// KAI scheduler: annotation spreading a `gpu-fraction`/`gpu-memory` share
/// over this many devices. Trainyard supports only `1`
/// (`GpuFractionsNumDevices`, NVIDIA/KAI-Scheduler
/// `pkg/common/constants/constants.go`).
pub const KAI_GPU_FRACTION_NUM_DEVICES: &str = "gpu-fraction-num-devices";

/// Kueue: pod annotation naming the topology level (a node label key) the
/// pod's PodSet must fit in (`PodSetRequiredTopologyAnnotation`,
/// kubernetes-sigs/kueue `apis/kueue/v1beta2/topology_types.go`).
pub const KUEUE_PODSET_REQUIRED_TOPOLOGY: &str = "kueue.x-k8s.io/podset-required-topology";
/// Kueue: pod annotation naming the topology level (a node label key) the
/// pod's PodSet should fit in (`PodSetPreferredTopologyAnnotation`, the
/// same file).
pub const KUEUE_PODSET_PREFERRED_TOPOLOGY: &str = "kueue.x-k8s.io/podset-preferred-topology";
/// KAI scheduler: workload (or pod) annotation naming the topology level (a
/// node label key) its pods must fit in (`TopologyRequiredPlacementKey`,
/// NVIDIA/KAI-Scheduler `pkg/podgrouper/podgrouper/plugins/constants/constants.go`;
/// KAI reads it from the top owner, Trainyard from the pod).
pub const KAI_TOPOLOGY_REQUIRED_PLACEMENT: &str = "kai.scheduler/topology-required-placement";
/// KAI scheduler: workload (or pod) annotation naming the topology level (a
/// node label key) its pods should fit in (`TopologyPreferredPlacementKey`,
/// the same file).
pub const KAI_TOPOLOGY_PREFERRED_PLACEMENT: &str = "kai.scheduler/topology-preferred-placement";
/// Kubeflow training operator: pod label with the replica's index within
/// its replica type (PyTorchJob, MPIJob, ...) (`ReplicaIndexLabel`,
/// kubeflow/training-operator `pkg/apis/kubeflow.org/v1/common_types.go`).
pub const KUBEFLOW_REPLICA_INDEX: &str = "training.kubeflow.org/replica-index";
/// JobSet: pod label (and annotation) with the index of the pod's child Job
/// within its replicated job (`JobIndexKey`, kubernetes-sigs/jobset
/// `api/jobset/v1alpha2/jobset_types.go`).
pub const JOBSET_JOB_INDEX: &str = "jobset.sigs.k8s.io/job-index";
/// Kubernetes Indexed Job: pod label (and, before 1.28 only, annotation)
/// with the pod's completion index.
pub const JOB_COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";

/// JobSet ranks: `job-index × JOBSET_RANK_STRIDE + completion-index`.
pub const JOBSET_RANK_STRIDE: u32 = 65_536;

// --- Node labels describing GPU devices (GPU feature discovery) ------------

/// Node label: GPU product name, e.g. `NVIDIA-H100-80GB-HBM3`.
pub const NODE_GPU_PRODUCT: &str = "nvidia.com/gpu.product";
/// Node label: memory of one GPU in MiB, e.g. `81559`.
pub const NODE_GPU_MEMORY_MIB: &str = "nvidia.com/gpu.memory";

/// Keys naming a pod's group, in precedence order, with where each is read
/// from.
pub const POD_GROUP_KEYS: &[(&str, KeyPlace)] = &[
    (POD_GROUP, KeyPlace::LabelOrAnnotation),
    (VOLCANO_GROUP_NAME, KeyPlace::Annotation),
    (COSCHEDULING_POD_GROUP, KeyPlace::Label),
    (KAI_POD_GROUP_NAME, KeyPlace::Annotation),
];

/// Keys naming a pod's queue, in precedence order: Trainyard's, KAI's,
/// then Volcano's two (its Job controller's key before the key of pods
/// without a Volcano Job; the two meet only on a pod written by hand).
pub const QUEUE_KEYS: &[(&str, KeyPlace)] = &[
    (QUEUE, KeyPlace::LabelOrAnnotation),
    (KAI_QUEUE, KeyPlace::Label),
    (VOLCANO_QUEUE_NAME, KeyPlace::LabelOrAnnotation),
    (VOLCANO_QUEUE_ANNOTATION, KeyPlace::Annotation),
];

/// Keys on a Namespace naming the queue of the jobs in it that name none,
/// in precedence order: Trainyard's label, then Volcano's annotation.
pub const NAMESPACE_QUEUE_KEYS: &[(&str, KeyPlace)] = &[
    (NAMESPACE_DEFAULT_QUEUE, KeyPlace::Label),
    (VOLCANO_QUEUE_ANNOTATION, KeyPlace::Annotation),
];

/// Pod keys naming the level the gang must fit in, in precedence order.
pub const REQUIRED_TOPOLOGY_KEYS: &[(&str, KeyPlace)] = &[
    (KUEUE_PODSET_REQUIRED_TOPOLOGY, KeyPlace::Annotation),
    (KAI_TOPOLOGY_REQUIRED_PLACEMENT, KeyPlace::Annotation),
];

/// Pod keys naming the level the gang should fit in, in precedence order.
pub const PREFERRED_TOPOLOGY_KEYS: &[(&str, KeyPlace)] = &[
    (KUEUE_PODSET_PREFERRED_TOPOLOGY, KeyPlace::Annotation),
    (KAI_TOPOLOGY_PREFERRED_PLACEMENT, KeyPlace::Annotation),
];

/// Keys saying whether a job may be evicted (`"true"` or `"false"`), in
/// precedence order, each read from a PodGroup and from the gang's pods.
pub const PREEMPTIBLE_KEYS: &[(&str, KeyPlace)] = &[
    (PREEMPTIBLE, KeyPlace::LabelOrAnnotation),
    (VOLCANO_PREEMPTABLE, KeyPlace::LabelOrAnnotation),
];

/// Where a key is looked up on an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyPlace {
    Label,
    Annotation,
    /// The label first, then the annotation.
    LabelOrAnnotation,
}
