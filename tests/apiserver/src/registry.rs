//! The resource registry: built-in kinds and the custom resources that CRD objects
//! declare. Discovery, routing, tables and validation all read it.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

mod crd;
pub use crd::crd_to_def;

/// Which built-in behaviour a resource has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Builtin {
    /// core/v1 Pod.
    Pod,
    /// core/v1 Node.
    Node,
    /// core/v1 Namespace.
    Namespace,
    /// core/v1 Event.
    Event,
    /// core/v1 ConfigMap.
    ConfigMap,
    /// scheduling.k8s.io/v1 PriorityClass.
    PriorityClass,
    /// policy/v1 PodDisruptionBudget.
    Pdb,
    /// coordination.k8s.io/v1 Lease.
    Lease,
    /// apiextensions.k8s.io/v1 CustomResourceDefinition.
    Crd,
    /// core/v1 ServiceAccount (with the `token` subresource).
    ServiceAccount,
    /// core/v1 Service.
    Service,
    /// core/v1 Secret.
    Secret,
    /// apps/v1 Deployment (stored only: no controller creates pods).
    Deployment,
    /// rbac.authorization.k8s.io/v1 ClusterRole.
    ClusterRole,
    /// rbac.authorization.k8s.io/v1 ClusterRoleBinding.
    ClusterRoleBinding,
    /// rbac.authorization.k8s.io/v1 Role.
    Role,
    /// rbac.authorization.k8s.io/v1 RoleBinding.
    RoleBinding,
    /// authorization.k8s.io/v1 SelfSubjectAccessReview (create only, never stored).
    SelfSubjectAccessReview,
    /// authorization.k8s.io/v1 SubjectAccessReview (create only, never stored).
    SubjectAccessReview,
    /// authentication.k8s.io/v1 TokenReview (create only, never stored).
    TokenReview,
    /// batch/v1 Job (stored only: no controller creates its pods).
    Job,
    /// apps/v1 ReplicaSet (stored only).
    ReplicaSet,
    /// apps/v1 StatefulSet (stored only).
    StatefulSet,
    /// core/v1 ReplicationController (stored only).
    ReplicationController,
    /// core/v1 PersistentVolume (cluster-scoped; no binding controller).
    PersistentVolume,
    /// core/v1 PersistentVolumeClaim (no binding controller, no provisioner).
    PersistentVolumeClaim,
    /// storage.k8s.io/v1 StorageClass.
    StorageClass,
    /// storage.k8s.io/v1 CSINode.
    CsiNode,
    /// storage.k8s.io/v1 CSIDriver.
    CsiDriver,
    /// storage.k8s.io/v1 CSIStorageCapacity.
    CsiStorageCapacity,
    /// storage.k8s.io/v1 VolumeAttachment (no attach/detach controller).
    VolumeAttachment,
    /// events.k8s.io/v1 Event: the core Events seen through the newer API (one
    /// storage, converted on the way in and out, as kube-apiserver does).
    EventsV1,
    /// resource.k8s.io/v1 ResourceSlice (cluster-scoped; see [`crate::dra`]).
    ResourceSlice,
    /// resource.k8s.io/v1 DeviceClass (cluster-scoped).
    DeviceClass,
    /// resource.k8s.io/v1 ResourceClaim (status subresource; spec immutable).
    ResourceClaim,
    /// resource.k8s.io/v1 ResourceClaimTemplate (spec immutable).
    ResourceClaimTemplate,
    /// resource.k8s.io/v1alpha3 DeviceTaintRule (cluster-scoped).
    DeviceTaintRule,
    /// scheduling.k8s.io/v1beta1 Workload (see [`crate::scheduling`]).
    Workload,
    /// scheduling.k8s.io/v1beta1 PodGroup (status subresource).
    PodGroup,
    /// scheduling.k8s.io/v1alpha2 Workload (stored apart from v1beta1's).
    WorkloadV1alpha2,
    /// scheduling.k8s.io/v1alpha2 PodGroup (stored apart from v1beta1's).
    PodGroupV1alpha2,
    /// A custom resource served from a CRD.
    Custom,
}

impl Builtin {
    /// A review kind: answered on create, never stored (`SelfSubjectAccessReview`,
    /// `SubjectAccessReview`, `TokenReview`).
    pub fn is_review(self) -> bool {
        matches!(
            self,
            Builtin::SelfSubjectAccessReview | Builtin::SubjectAccessReview | Builtin::TokenReview
        )
    }
}

/// One additional printer column of a CRD version.
#[derive(Debug, Clone)]
pub struct PrinterColumn {
    /// Column header.
    pub name: String,
    /// `integer`, `number`, `string`, `boolean` or `date`.
    pub ty: String,
    /// `format` (e.g. `name`).
    pub format: String,
    /// Description.
    pub description: String,
    /// 0 = shown by default; >0 only with `-o wide`.
    pub priority: i64,
    /// JSONPath into the object.
    pub json_path: String,
}

/// A served version of a resource.
#[derive(Debug, Clone)]
pub struct VersionDef {
    /// Version name.
    pub name: String,
    /// The CRD's `openAPIV3Schema` for this version (custom resources only).
    pub schema: Option<Value>,
    /// Additional printer columns (custom resources only).
    pub columns: Vec<PrinterColumn>,
    /// Whether this version has a `status` subresource.
    pub status: bool,
    /// JSONPaths of the CRD's `selectableFields`.
    pub selectable: Vec<String>,
}

/// A resource kind the server serves.
#[derive(Debug, Clone)]
pub struct ResourceDef {
    /// API group; empty for core.
    pub group: String,
    /// Served versions, preferred first.
    pub versions: Vec<VersionDef>,
    /// Plural (the URL segment).
    pub plural: String,
    /// Singular name.
    pub singular: String,
    /// Kind.
    pub kind: String,
    /// List kind.
    pub list_kind: String,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// Short names (`po`, `no`, ...).
    pub short_names: Vec<String>,
    /// Categories (`all`, ...).
    pub categories: Vec<String>,
    /// Built-in behaviour.
    pub builtin: Builtin,
}

impl ResourceDef {
    /// Storage key: `group/plural`, except for `events.k8s.io` Events, which
    /// are stored with the core Events (`/events`).
    pub fn key(&self) -> String {
        if self.builtin == Builtin::EventsV1 {
            return "/events".into();
        }
        self.registry_key()
    }

    /// Registry key: `group/plural` (what [`Registry::by_key`] looks up);
    /// `group/plural@v1alpha2` for the v1alpha2 Workloads and PodGroups,
    /// which have a storage of their own beside v1beta1's.
    pub fn registry_key(&self) -> String {
        if crate::scheduling::is_v1alpha2(self.builtin) {
            return format!("{}/{}@v1alpha2", self.group, self.plural);
        }
        format!("{}/{}", self.group, self.plural)
    }

    /// The stored path a field selector label reads: the label itself, but
    /// for labels kube-apiserver converts (an `events.k8s.io` Event's
    /// `regarding.*`, a Job's `status.successful`).
    pub fn field_path(&self, label: &str) -> String {
        match (self.builtin, label) {
            (Builtin::EventsV1, _) => crate::events::core_field_label(label),
            (Builtin::Job, "status.successful") => "status.succeeded".into(),
            _ => label.into(),
        }
    }

    /// `Kind.group` (or `Kind` for core), used in Invalid messages.
    pub fn kind_qualified(&self) -> String {
        if self.group.is_empty() {
            self.kind.clone()
        } else {
            format!("{}.{}", self.kind, self.group)
        }
    }

    /// The version definition, if served.
    pub fn version(&self, v: &str) -> Option<&VersionDef> {
        self.versions.iter().find(|x| x.name == v)
    }

    /// `group/version` or `version` for core.
    pub fn api_version(&self, v: &str) -> String {
        if self.group.is_empty() {
            v.to_string()
        } else {
            format!("{}/{v}", self.group)
        }
    }

    /// Whether `version` has a status subresource.
    pub fn has_status(&self, version: &str) -> bool {
        self.version(version).is_some_and(|v| v.status)
    }

    /// Subresources besides `status`.
    pub fn extra_subresources(&self) -> &'static [&'static str] {
        match self.builtin {
            Builtin::Pod => &["binding", "eviction", "portforward"],
            Builtin::ServiceAccount => &["token"],
            _ => &[],
        }
    }

    /// The verbs discovery lists for the main resource.
    pub fn verbs(&self) -> &'static [&'static str] {
        match self.builtin {
            Builtin::SelfSubjectAccessReview
            | Builtin::SubjectAccessReview
            | Builtin::TokenReview => &["create"],
            _ => &[
                "create",
                "delete",
                "deletecollection",
                "get",
                "list",
                "patch",
                "update",
                "watch",
            ],
        }
    }

    /// Field selector labels this resource accepts (besides metadata.name/namespace).
    pub fn field_labels(&self) -> Vec<String> {
        let fixed: &[&str] = match self.builtin {
            Builtin::Pod => &[
                "spec.nodeName",
                "spec.schedulerName",
                "spec.restartPolicy",
                "spec.serviceAccountName",
                "spec.hostNetwork",
                "status.phase",
                "status.podIP",
                "status.nominatedNodeName",
            ],
            Builtin::Event => &[
                "involvedObject.kind",
                "involvedObject.namespace",
                "involvedObject.name",
                "involvedObject.uid",
                "involvedObject.apiVersion",
                "involvedObject.resourceVersion",
                "involvedObject.fieldPath",
                "reason",
                "reportingComponent",
                "source",
                "type",
            ],
            Builtin::EventsV1 => &[
                "regarding.kind",
                "regarding.namespace",
                "regarding.name",
                "regarding.uid",
                "regarding.apiVersion",
                "regarding.resourceVersion",
                "regarding.fieldPath",
                "reason",
                "reportingController",
                "source",
                "type",
            ],
            Builtin::Node => &["spec.unschedulable"],
            Builtin::Namespace => &["status.phase"],
            Builtin::Secret => &["type"],
            Builtin::Job => &["status.successful"],
            Builtin::ReplicaSet | Builtin::ReplicationController => &["status.replicas"],
            Builtin::ResourceSlice => &["spec.nodeName", "spec.driver"],
            _ => &[],
        };
        let mut out: Vec<String> = fixed.iter().map(|s| s.to_string()).collect();
        for v in &self.versions {
            for s in &v.selectable {
                out.push(s.trim_start_matches('.').to_string());
            }
        }
        out
    }
}

pub(crate) fn builtin(
    api_version: &str,
    plural: &str,
    kind: &str,
    namespaced: bool,
    short: &[&str],
    status: bool,
    b: Builtin,
) -> ResourceDef {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    ResourceDef {
        group: group.into(),
        versions: vec![VersionDef {
            name: version.into(),
            schema: None,
            columns: Vec::new(),
            status,
            selectable: Vec::new(),
        }],
        plural: plural.into(),
        singular: kind.to_lowercase(),
        kind: kind.into(),
        list_kind: format!("{kind}List"),
        namespaced,
        short_names: short.iter().map(|s| s.to_string()).collect(),
        categories: if matches!(
            b,
            Builtin::Pod
                | Builtin::Service
                | Builtin::Deployment
                | Builtin::ReplicaSet
                | Builtin::StatefulSet
                | Builtin::ReplicationController
                | Builtin::Job
        ) {
            vec!["all".into()]
        } else {
            Vec::new()
        },
        builtin: b,
    }
}

/// The kinds a client-go program's informers (kube-scheduler's) and the
/// README's examples need besides the ones above: stored, listed and watched,
/// with no controller behind them.
fn workload_and_storage_kinds() -> Vec<ResourceDef> {
    use Builtin as B;
    // (apiVersion, plural, kind, namespaced, short names, status, builtin)
    type Row = (
        &'static str,
        &'static str,
        &'static str,
        bool,
        &'static [&'static str],
        bool,
        Builtin,
    );
    const ROWS: &[Row] = &[
        ("batch/v1", "jobs", "Job", true, &[], true, B::Job),
        (
            "apps/v1",
            "replicasets",
            "ReplicaSet",
            true,
            &["rs"],
            true,
            B::ReplicaSet,
        ),
        (
            "apps/v1",
            "statefulsets",
            "StatefulSet",
            true,
            &["sts"],
            true,
            B::StatefulSet,
        ),
        (
            "v1",
            "replicationcontrollers",
            "ReplicationController",
            true,
            &["rc"],
            true,
            B::ReplicationController,
        ),
        (
            "v1",
            "persistentvolumes",
            "PersistentVolume",
            false,
            &["pv"],
            true,
            B::PersistentVolume,
        ),
        (
            "v1",
            "persistentvolumeclaims",
            "PersistentVolumeClaim",
            true,
            &["pvc"],
            true,
            B::PersistentVolumeClaim,
        ),
        (
            "storage.k8s.io/v1",
            "storageclasses",
            "StorageClass",
            false,
            &["sc"],
            false,
            B::StorageClass,
        ),
        (
            "storage.k8s.io/v1",
            "csinodes",
            "CSINode",
            false,
            &[],
            false,
            B::CsiNode,
        ),
        (
            "storage.k8s.io/v1",
            "csidrivers",
            "CSIDriver",
            false,
            &[],
            false,
            B::CsiDriver,
        ),
        (
            "storage.k8s.io/v1",
            "csistoragecapacities",
            "CSIStorageCapacity",
            true,
            &[],
            false,
            B::CsiStorageCapacity,
        ),
        (
            "storage.k8s.io/v1",
            "volumeattachments",
            "VolumeAttachment",
            false,
            &[],
            true,
            B::VolumeAttachment,
        ),
        (
            "events.k8s.io/v1",
            "events",
            "Event",
            true,
            &["ev"],
            false,
            B::EventsV1,
        ),
    ];
    ROWS.iter()
        .map(|&(av, plural, kind, ns, short, status, b)| {
            builtin(av, plural, kind, ns, short, status, b)
        })
        .collect()
}

/// The registry: registry key (`group/plural`) → resource.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    defs: BTreeMap<String, ResourceDef>,
}

impl Registry {
    /// The built-in kinds.
    pub fn with_builtins() -> Self {
        let mut r = Registry::default();
        for d in [
            builtin("v1", "pods", "Pod", true, &["po"], true, Builtin::Pod),
            builtin("v1", "nodes", "Node", false, &["no"], true, Builtin::Node),
            builtin(
                "v1",
                "namespaces",
                "Namespace",
                false,
                &["ns"],
                true,
                Builtin::Namespace,
            ),
            builtin(
                "v1",
                "events",
                "Event",
                true,
                &["ev"],
                false,
                Builtin::Event,
            ),
            builtin(
                "v1",
                "configmaps",
                "ConfigMap",
                true,
                &["cm"],
                false,
                Builtin::ConfigMap,
            ),
            builtin(
                "scheduling.k8s.io/v1",
                "priorityclasses",
                "PriorityClass",
                false,
                &["pc"],
                false,
                Builtin::PriorityClass,
            ),
            builtin(
                "policy/v1",
                "poddisruptionbudgets",
                "PodDisruptionBudget",
                true,
                &["pdb"],
                true,
                Builtin::Pdb,
            ),
            builtin(
                "coordination.k8s.io/v1",
                "leases",
                "Lease",
                true,
                &[],
                false,
                Builtin::Lease,
            ),
            builtin(
                "apiextensions.k8s.io/v1",
                "customresourcedefinitions",
                "CustomResourceDefinition",
                false,
                &["crd", "crds"],
                true,
                Builtin::Crd,
            ),
            builtin(
                "v1",
                "serviceaccounts",
                "ServiceAccount",
                true,
                &["sa"],
                false,
                Builtin::ServiceAccount,
            ),
            builtin(
                "v1",
                "services",
                "Service",
                true,
                &["svc"],
                true,
                Builtin::Service,
            ),
            builtin("v1", "secrets", "Secret", true, &[], false, Builtin::Secret),
            builtin(
                "apps/v1",
                "deployments",
                "Deployment",
                true,
                &["deploy"],
                true,
                Builtin::Deployment,
            ),
            builtin(
                "rbac.authorization.k8s.io/v1",
                "clusterroles",
                "ClusterRole",
                false,
                &[],
                false,
                Builtin::ClusterRole,
            ),
            builtin(
                "rbac.authorization.k8s.io/v1",
                "clusterrolebindings",
                "ClusterRoleBinding",
                false,
                &[],
                false,
                Builtin::ClusterRoleBinding,
            ),
            builtin(
                "rbac.authorization.k8s.io/v1",
                "roles",
                "Role",
                true,
                &[],
                false,
                Builtin::Role,
            ),
            builtin(
                "rbac.authorization.k8s.io/v1",
                "rolebindings",
                "RoleBinding",
                true,
                &[],
                false,
                Builtin::RoleBinding,
            ),
            builtin(
                "authorization.k8s.io/v1",
                "selfsubjectaccessreviews",
                "SelfSubjectAccessReview",
                false,
                &[],
                false,
                Builtin::SelfSubjectAccessReview,
            ),
            builtin(
                "authorization.k8s.io/v1",
                "subjectaccessreviews",
                "SubjectAccessReview",
                false,
                &[],
                false,
                Builtin::SubjectAccessReview,
            ),
            builtin(
                "authentication.k8s.io/v1",
                "tokenreviews",
                "TokenReview",
                false,
                &[],
                false,
                Builtin::TokenReview,
            ),
        ]
        .into_iter()
        .chain(workload_and_storage_kinds())
        .chain(crate::dra::defs())
        .chain(crate::scheduling::defs())
        {
            r.defs.insert(d.registry_key(), d);
        }
        r
    }

    /// All resources in key order.
    pub fn all(&self) -> impl Iterator<Item = &ResourceDef> {
        self.defs.values()
    }

    /// Keeps only the Workload/PodGroup versions `apis` chooses.
    pub fn serve_workload_apis(&mut self, apis: crate::scheduling::WorkloadApis) {
        self.defs
            .retain(|_, d| crate::scheduling::served(d.builtin, apis));
    }

    /// Finds the resource served at `group/version/plural`.
    pub fn find(&self, group: &str, version: &str, plural: &str) -> Option<&ResourceDef> {
        self.defs
            .get(&format!("{group}/{plural}"))
            .filter(|d| d.version(version).is_some())
            .or_else(|| {
                self.defs.values().find(|d| {
                    d.group == group && d.plural == plural && d.version(version).is_some()
                })
            })
    }

    /// Finds a resource by storage key.
    pub fn by_key(&self, key: &str) -> Option<&ResourceDef> {
        self.defs.get(key)
    }

    /// Groups in order (core first is handled by callers), each with its
    /// versions, preferred first: a group of built-in kinds in kube's version
    /// priority (`v1`, `v1beta1`, `v1alpha2`, as kube-apiserver lists them),
    /// a custom group in its CRDs' order (storage version first).
    pub fn groups(&self) -> BTreeMap<String, Vec<String>> {
        let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut custom: BTreeSet<String> = BTreeSet::new();
        for d in self.defs.values() {
            if d.builtin == Builtin::Custom {
                custom.insert(d.group.clone());
            }
            let e = out.entry(d.group.clone()).or_default();
            for v in &d.versions {
                if !e.contains(&v.name) {
                    e.push(v.name.clone());
                }
            }
        }
        for (g, vs) in out.iter_mut() {
            if !custom.contains(g) {
                vs.sort_by_key(|v| std::cmp::Reverse(crate::discovery::version_priority(v)));
            }
        }
        out
    }

    /// Adds or replaces the custom resource a CRD object declares. Returns its key.
    pub fn apply_crd(&mut self, crd: &Value) -> Option<String> {
        let def = crd_to_def(crd)?;
        let key = def.registry_key();
        if self
            .defs
            .get(&key)
            .is_some_and(|d| d.builtin != Builtin::Custom)
        {
            return None;
        }
        self.defs.insert(key.clone(), def);
        Some(key)
    }

    /// Removes a custom resource by key.
    pub fn remove(&mut self, key: &str) {
        if self
            .defs
            .get(key)
            .is_some_and(|d| d.builtin == Builtin::Custom)
        {
            self.defs.remove(key);
        }
    }
}
