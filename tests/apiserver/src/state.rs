//! The server's state and the write paths every caller (HTTP, kubelet, library
//! handle) goes through: create, update (main resource or `status`), delete.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult, Cause};
use crate::faults::Faults;
use crate::kubelet::KubeletConfig;
use crate::registry::{Builtin, Registry, ResourceDef};
use crate::store::{EventType, Store, obj_rv};
use crate::time::{Clock, format_rfc3339};
use crate::validation;

/// Everything behind the server's lock.
pub struct State {
    /// Objects, revisions, history.
    pub store: Store,
    /// Served kinds.
    pub registry: Registry,
    /// The clock.
    pub clock: Clock,
    /// Simulated kubelet settings.
    pub kubelet: KubeletConfig,
    /// Injected faults.
    pub faults: Faults,
    /// Seeded randomness (names, uids, fault rolls).
    pub rng: ChaCha8Rng,
    /// Authentication settings and tokens.
    pub auth: crate::auth::AuthState,
}

/// Options of a write request.
#[derive(Debug, Clone, Default)]
pub struct WriteOpts {
    /// `fieldValidation=Strict`: unknown fields are an error rather than pruned.
    pub strict: bool,
}

const NAME_CHARS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

impl State {
    /// A fresh state with the default namespaces.
    pub fn new(window: usize, clock: Clock, kubelet: KubeletConfig, seed: u64) -> Self {
        let mut s = State {
            store: Store::new(window),
            registry: Registry::with_builtins(),
            clock,
            kubelet,
            faults: Faults::default(),
            rng: ChaCha8Rng::seed_from_u64(seed),
            auth: crate::auth::AuthState::default(),
        };
        if let Some(def) = s.registry.by_key("/namespaces").cloned() {
            for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
                // Creating the fixed namespaces cannot fail on an empty store.
                let _ = s.create(
                    &def,
                    "v1",
                    None,
                    json!({"metadata": {"name": ns}}),
                    &WriteOpts::default(),
                );
            }
        }
        s
    }

    /// Now, per the clock.
    pub fn now(&self) -> i64 {
        self.clock.now()
    }

    fn uid(&mut self) -> String {
        let b: [u8; 16] = self.rng.random();
        let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
        format!(
            "{}-{}-4{}-a{}-{}",
            &h[0..8],
            &h[8..12],
            &h[13..16],
            &h[17..20],
            &h[20..32]
        )
    }

    fn suffix(&mut self) -> String {
        (0..5)
            .map(|_| NAME_CHARS[self.rng.random_range(0..NAME_CHARS.len())] as char)
            .collect()
    }

    /// Sets `apiVersion`/`kind` for the version a client asked for (and
    /// converts a stored core Event for `events.k8s.io`).
    pub fn present(def: &ResourceDef, version: &str, mut obj: Value) -> Value {
        if def.builtin == Builtin::EventsV1 && obj["kind"] != "Status" {
            obj = crate::events::to_v1(obj);
        }
        obj["apiVersion"] = json!(def.api_version(version));
        obj["kind"] = json!(def.kind);
        obj
    }

    fn check_ns(&self, def: &ResourceDef, ns: Option<&str>) -> ApiResult<String> {
        if !def.namespaced {
            return Ok(String::new());
        }
        let ns = ns
            .filter(|n| !n.is_empty())
            .ok_or_else(|| ApiError::bad_request("the namespace of the object must be set"))?;
        if self.store.get("/namespaces", "", ns).is_none() {
            return Err(ApiError::not_found("", "namespaces", ns));
        }
        Ok(ns.to_string())
    }

    fn validate(
        &self,
        def: &ResourceDef,
        version: &str,
        obj: &mut Value,
        opts: &WriteOpts,
        old: Option<&Value>,
    ) -> ApiResult<()> {
        let name = obj["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let mut causes = if crate::kinds::path_segment_named(def) {
            crate::kinds::path_segment_causes(&name)
        } else {
            validation::name_causes(&name)
        };
        if def.builtin == Builtin::Pod {
            causes.extend(validation::pod_causes(obj));
        }
        causes.extend(crate::kinds::causes(def, obj, old));
        if def.builtin == Builtin::Crd {
            let want = format!(
                "{}.{}",
                obj["spec"]["names"]["plural"].as_str().unwrap_or(""),
                obj["spec"]["group"].as_str().unwrap_or("")
            );
            if want != name {
                causes.push(Cause {
                    reason: "FieldValueInvalid".into(),
                    message: format!(
                        "Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group"
                    ),
                    field: "metadata.name".into(),
                });
            }
            if let Some(vs) = obj["spec"]["versions"].as_array() {
                for (i, v) in vs.iter().enumerate() {
                    if let Some(schema) = v["schema"].get("openAPIV3Schema") {
                        let field = format!("spec.versions[{i}].schema.openAPIV3Schema");
                        causes.extend(validation::cel_compile_causes(schema, &field));
                    }
                }
            }
            if crate::registry::crd_to_def(obj).is_none() {
                causes.push(Cause {
                    reason: "FieldValueRequired".into(),
                    message: "Required value".into(),
                    field: "spec".into(),
                });
            }
        }
        if let Some(schema) = def.version(version).and_then(|v| v.schema.as_ref()) {
            let out = validation::check(obj, schema);
            causes.extend(out.causes);
            if causes.is_empty() {
                causes.extend(validation::cel_causes(schema, obj, old));
            }
            if opts.strict && !out.pruned.is_empty() {
                let list: Vec<String> = out
                    .pruned
                    .iter()
                    .map(|p| format!("unknown field \"{p}\""))
                    .collect();
                return Err(ApiError::bad_request(format!(
                    "{} in body: {}",
                    def.kind_qualified(),
                    list.join(", ")
                )));
            }
        }
        if causes.is_empty() {
            Ok(())
        } else {
            Err(ApiError::invalid(
                &def.kind_qualified(),
                &def.group,
                &name,
                causes,
            ))
        }
    }

    /// Creates an object (POST).
    pub fn create(
        &mut self,
        def: &ResourceDef,
        version: &str,
        ns: Option<&str>,
        mut obj: Value,
        opts: &WriteOpts,
    ) -> ApiResult<Value> {
        if !obj.is_object() {
            return Err(ApiError::bad_request(
                "the body of the request must be an object",
            ));
        }
        if def.builtin.is_review() {
            // Reviews are answered (see `rbac::self_subject_access_review`), never stored.
            return Err(ApiError::method_not_allowed());
        }
        if def.builtin == Builtin::EventsV1 {
            let target = ns
                .or(obj["metadata"]["namespace"].as_str())
                .unwrap_or_default();
            let causes = crate::events::create_causes(&obj, target);
            if !causes.is_empty() {
                let name = obj["metadata"]["name"].as_str().unwrap_or_default();
                return Err(ApiError::invalid(
                    &def.kind_qualified(),
                    &def.group,
                    name,
                    causes,
                ));
            }
            let core = self.core_events()?;
            return self
                .create(&core, "v1", ns, crate::events::to_core(obj), opts)
                .map_err(events_v1_error);
        }
        let body_ns = obj["metadata"]["namespace"].as_str().map(String::from);
        if let (Some(b), Some(u)) = (&body_ns, ns)
            && def.namespaced
            && b != u
        {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        let ns = self.check_ns(def, ns.or(body_ns.as_deref()))?;
        if obj["metadata"]["name"].as_str().is_none_or(str::is_empty) {
            match obj["metadata"]["generateName"].as_str() {
                Some(g) if !g.is_empty() => {
                    let n = format!("{g}{}", self.suffix());
                    obj["metadata"]["name"] = json!(n);
                }
                _ => {
                    return Err(ApiError::invalid(
                        &def.kind_qualified(),
                        &def.group,
                        "",
                        vec![Cause {
                            reason: "FieldValueRequired".into(),
                            message: "Required value: name or generateName is required".into(),
                            field: "metadata.name".into(),
                        }],
                    ));
                }
            }
        }
        let name = obj["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if self.store.get(&def.key(), &ns, &name).is_some() {
            return Err(ApiError::already_exists(&def.group, &def.plural, &name));
        }
        let now = format_rfc3339(self.now());
        let uid = self.uid();
        {
            let md = &mut obj["metadata"];
            if def.namespaced {
                md["namespace"] = json!(ns);
            } else if let Some(m) = md.as_object_mut() {
                m.remove("namespace");
            }
            md["uid"] = json!(uid);
            md["creationTimestamp"] = json!(now);
            md["generation"] = json!(1);
            if let Some(m) = md.as_object_mut() {
                m.remove("deletionTimestamp");
                m.remove("deletionGracePeriodSeconds");
                m.remove("resourceVersion");
                m.remove("managedFields");
            }
        }
        obj = Self::present(def, &def.versions[0].name, obj);
        self.prepare_create(def, version, &mut obj)?;
        self.validate(def, version, &mut obj, opts, None)?;
        let stored = self.store.commit(&def.key(), EventType::Added, obj);
        if def.builtin == Builtin::Crd {
            self.crd_changed(&stored);
        }
        Ok(stored)
    }

    fn prepare_create(
        &mut self,
        def: &ResourceDef,
        version: &str,
        obj: &mut Value,
    ) -> ApiResult<()> {
        match def.builtin {
            Builtin::Pod => {
                let spec = &mut obj["spec"];
                for (k, v) in [
                    ("schedulerName", json!("default-scheduler")),
                    ("restartPolicy", json!("Always")),
                    ("terminationGracePeriodSeconds", json!(30)),
                    ("dnsPolicy", json!("ClusterFirst")),
                ] {
                    if spec.get(k).is_none() {
                        spec[k] = v;
                    }
                }
                if let Some(pc) = spec["priorityClassName"].as_str().map(String::from) {
                    let found = self
                        .store
                        .get("scheduling.k8s.io/priorityclasses", "", &pc)
                        .cloned();
                    match found {
                        Some(p) => {
                            obj["spec"]["priority"] = p["value"].clone();
                            if let Some(pp) = p.get("preemptionPolicy") {
                                obj["spec"]["preemptionPolicy"] = pp.clone();
                            }
                        }
                        None => {
                            return Err(ApiError::new(
                                403,
                                "Forbidden",
                                format!(
                                    "pods \"{}\" is forbidden: no PriorityClass with name {pc} was found",
                                    obj["metadata"]["name"].as_str().unwrap_or("")
                                ),
                            ));
                        }
                    }
                } else if obj["spec"].get("priority").is_none() {
                    obj["spec"]["priority"] = json!(0);
                }
                obj["status"] = json!({"phase": "Pending", "qosClass": "BestEffort"});
            }
            Builtin::Namespace => {
                let name = obj["metadata"]["name"].clone();
                obj["metadata"]["labels"]["kubernetes.io/metadata.name"] = name;
                obj["status"] = json!({"phase": "Active"});
            }
            Builtin::Pdb => {
                obj["status"] = json!({"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0, "observedGeneration": 1});
            }
            Builtin::Crd => {
                let names = obj["spec"]["names"].clone();
                let stored: Vec<Value> = obj["spec"]["versions"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter(|v| v["storage"] == json!(true))
                            .map(|v| v["name"].clone())
                            .collect()
                    })
                    .unwrap_or_default();
                let t = format_rfc3339(self.now());
                obj["status"] = json!({
                    "acceptedNames": names,
                    "storedVersions": stored,
                    "conditions": [
                        {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found", "lastTransitionTime": t},
                        {"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted", "lastTransitionTime": t},
                    ],
                });
            }
            Builtin::Custom => {
                if def.has_status(version)
                    && let Some(m) = obj.as_object_mut()
                {
                    m.remove("status");
                }
            }
            Builtin::Service | Builtin::Secret | Builtin::Deployment => {
                crate::kinds::prepare_create(self, def, obj)?;
            }
            Builtin::Job
            | Builtin::ReplicaSet
            | Builtin::StatefulSet
            | Builtin::ReplicationController => crate::workloads::prepare_create(def.builtin, obj)?,
            Builtin::PersistentVolume
            | Builtin::PersistentVolumeClaim
            | Builtin::StorageClass
            | Builtin::CsiNode
            | Builtin::CsiDriver
            | Builtin::CsiStorageCapacity
            | Builtin::VolumeAttachment => {
                crate::storage::prepare_create(def.builtin, obj, self.now())?
            }
            Builtin::ResourceSlice
            | Builtin::DeviceClass
            | Builtin::ResourceClaim
            | Builtin::ResourceClaimTemplate
            | Builtin::DeviceTaintRule => crate::dra::prepare_create(def.builtin, obj),
            Builtin::Workload
            | Builtin::PodGroup
            | Builtin::WorkloadV1alpha2
            | Builtin::PodGroupV1alpha2 => crate::scheduling::prepare_create(def.builtin, obj),
            Builtin::Node
            | Builtin::Event
            | Builtin::ConfigMap
            | Builtin::PriorityClass
            | Builtin::Lease
            | Builtin::ServiceAccount
            | Builtin::ClusterRole
            | Builtin::ClusterRoleBinding
            | Builtin::Role
            | Builtin::RoleBinding
            | Builtin::SelfSubjectAccessReview
            | Builtin::SubjectAccessReview
            | Builtin::TokenReview
            | Builtin::EventsV1 => {}
        }
        Ok(())
    }

    /// Updates an object (PUT), the main resource or its `status` subresource.
    pub fn update(
        &mut self,
        def: &ResourceDef,
        version: &str,
        (ns, name): (&str, &str),
        mut obj: Value,
        status: bool,
        opts: &WriteOpts,
    ) -> ApiResult<Value> {
        if def.builtin == Builtin::EventsV1 {
            let core = self.core_events()?;
            let obj = crate::events::to_core(obj);
            return self
                .update(&core, "v1", (ns, name), obj, status, opts)
                .map_err(events_v1_error);
        }
        let old = self
            .store
            .get(&def.key(), ns, name)
            .cloned()
            .ok_or_else(|| ApiError::not_found(&def.group, &def.plural, name))?;
        if obj["metadata"]["name"].as_str().is_some_and(|n| n != name) {
            return Err(ApiError::bad_request(
                "the name of the object does not match the name on the URL",
            ));
        }
        if let Some(want) = obj["metadata"]["resourceVersion"]
            .as_str()
            .filter(|s| !s.is_empty())
            && Some(want.to_string())
                != old["metadata"]["resourceVersion"]
                    .as_str()
                    .map(String::from)
        {
            return Err(ApiError::stale(&def.group, &def.plural, name));
        }
        // kube-apiserver keeps the stored uid when the body has none and
        // refuses a different one (`rest.BeforeUpdate`, then the object
        // meta's update validation: 422), main resource and status alike,
        // so a uid in a patch makes it conditional on the object (a PUT's
        // uid is a precondition, 409, checked by its route first). A
        // custom resource's status update takes the stored object's
        // metadata whole, so its uid is never compared.
        if let Some(uid) = obj["metadata"]["uid"].as_str().filter(|s| !s.is_empty())
            && !(status && def.builtin == Builtin::Custom)
            && Some(uid) != old["metadata"]["uid"].as_str()
        {
            return Err(immutable(def, name, "metadata.uid", &format!("\"{uid}\"")));
        }
        let has_status = def.has_status(version);
        if status {
            let mut next = old.clone();
            next["status"] = obj.get("status").cloned().unwrap_or(Value::Null);
            obj = next;
        } else {
            obj["metadata"]["name"] = json!(name);
            for k in [
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
                "namespace",
            ] {
                match old["metadata"].get(k) {
                    Some(v) => obj["metadata"][k] = v.clone(),
                    None => {
                        if let Some(m) = obj["metadata"].as_object_mut() {
                            m.remove(k);
                        }
                    }
                }
            }
            if has_status {
                match old.get("status") {
                    Some(s) => obj["status"] = s.clone(),
                    None => {
                        if let Some(m) = obj.as_object_mut() {
                            m.remove("status");
                        }
                    }
                }
            }
            if def.builtin == Builtin::Pod {
                check_pod_spec_update(&old, &obj, name)?;
            }
            crate::kinds::prepare_update(def, &old, &mut obj)?;
            if def.builtin == Builtin::Crd
                && (old["spec"]["group"] != obj["spec"]["group"]
                    || old["spec"]["names"]["plural"] != obj["spec"]["names"]["plural"])
            {
                return Err(immutable(def, name, "spec.group", ""));
            }
            if def.builtin == Builtin::Crd {
                obj["status"] = old["status"].clone();
            }
        }
        obj = Self::present(def, &def.versions[0].name, obj);
        self.validate(def, version, &mut obj, opts, Some(&old))?;
        if spec_of(&obj) != spec_of(&old) {
            let g = old["metadata"]["generation"].as_i64().unwrap_or(1) + 1;
            obj["metadata"]["generation"] = json!(g);
        }
        if obj == old_without_rv(&old, &obj) {
            return Ok(old);
        }
        let deleting = obj["metadata"]["deletionTimestamp"].is_string();
        let had_finalizers = old["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty());
        let no_finalizers = obj["metadata"]["finalizers"]
            .as_array()
            .is_none_or(Vec::is_empty);
        let graceful = obj["metadata"]["deletionGracePeriodSeconds"]
            .as_i64()
            .unwrap_or(0)
            > 0;
        if deleting && had_finalizers && no_finalizers && !graceful {
            return Ok(self.remove(def, obj));
        }
        let stored = self.store.commit(&def.key(), EventType::Modified, obj);
        if def.builtin == Builtin::Crd {
            self.crd_changed(&stored);
        }
        Ok(stored)
    }

    /// Removes an object for good (emits DELETED).
    pub fn remove(&mut self, def: &ResourceDef, obj: Value) -> Value {
        let out = self.store.commit(&def.key(), EventType::Deleted, obj);
        if def.builtin == Builtin::Crd
            && let Some(d) = crate::registry::crd_to_def(&out)
        {
            let key = d.key();
            self.store.drop_resource(&key);
            self.registry.remove(&key);
        }
        if def.builtin == Builtin::Namespace {
            let ns = out["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let defs: Vec<ResourceDef> = self
                .registry
                .all()
                .filter(|d| d.namespaced)
                .cloned()
                .collect();
            for d in defs {
                for o in self.store.list(&d.key(), Some(&ns)) {
                    self.store.commit(&d.key(), EventType::Deleted, o);
                }
            }
        }
        out
    }

    /// Deletes an object: graceful for bound pods, deferred while finalizers remain.
    pub fn delete(
        &mut self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        grace: Option<i64>,
        pre_uid: Option<&str>,
        pre_rv: Option<&str>,
    ) -> ApiResult<Value> {
        let old = self
            .store
            .get(&def.key(), ns, name)
            .cloned()
            .ok_or_else(|| ApiError::not_found(&def.group, &def.plural, name))?;
        if pre_uid.is_some_and(|u| Some(u) != old["metadata"]["uid"].as_str()) {
            return Err(ApiError::conflict(
                &def.group,
                &def.plural,
                name,
                "Precondition failed: UID in precondition does not match the UID of the object",
            ));
        }
        if pre_rv.is_some_and(|r| Some(r) != old["metadata"]["resourceVersion"].as_str()) {
            return Err(ApiError::conflict(
                &def.group,
                &def.plural,
                name,
                "Precondition failed: ResourceVersion in precondition does not match the ResourceVersion of the object",
            ));
        }
        let now = self.now();
        let has_finalizers = old["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty());
        let pod_grace = if def.builtin == Builtin::Pod {
            let bound = old["spec"]["nodeName"]
                .as_str()
                .is_some_and(|n| !n.is_empty());
            let terminal = matches!(
                old["status"]["phase"].as_str(),
                Some("Succeeded" | "Failed")
            );
            let g = grace
                .or(old["spec"]["terminationGracePeriodSeconds"].as_i64())
                .unwrap_or(30);
            if bound && !terminal && g > 0 {
                Some(g)
            } else {
                None
            }
        } else {
            None
        };
        if has_finalizers || pod_grace.is_some() {
            let mut obj = old.clone();
            let g = pod_grace.unwrap_or(0);
            let existing = old["metadata"]["deletionTimestamp"]
                .as_str()
                .and_then(crate::time::parse_rfc3339);
            let at = existing.map_or(now + g, |e| e.min(now + g));
            obj["metadata"]["deletionTimestamp"] = json!(format_rfc3339(at));
            obj["metadata"]["deletionGracePeriodSeconds"] = json!(g);
            if obj == old {
                return Ok(old);
            }
            return Ok(self.store.commit(&def.key(), EventType::Modified, obj));
        }
        Ok(self.remove(def, old))
    }

    /// The core Events' definition (where `events.k8s.io` Events are stored).
    fn core_events(&self) -> ApiResult<ResourceDef> {
        self.registry
            .by_key("/events")
            .cloned()
            .ok_or_else(|| ApiError::internal("core Events are not registered"))
    }

    fn crd_changed(&mut self, crd: &Value) {
        if self.registry.apply_crd(crd).is_none() {
            tracing::warn!(crd = ?crd["metadata"]["name"], "CRD not served (malformed or shadows a built-in)");
        }
    }

    /// Finds the resource a `apiVersion`/`kind` pair names.
    pub fn def_for(&self, api_version: &str, kind: &str) -> Option<(ResourceDef, String)> {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        self.registry
            .all()
            .find(|d| d.group == group && d.kind == kind && d.version(version).is_some())
            .map(|d| (d.clone(), version.to_string()))
    }

    /// The stored object's resourceVersion check used by patches.
    pub fn current_rv(&self, def: &ResourceDef, ns: &str, name: &str) -> Option<u64> {
        self.store.get(&def.key(), ns, name).and_then(obj_rv)
    }
}

/// An error of the core Events' storage as the `events.k8s.io` resource
/// says it (`events.events.k8s.io "x" already exists`).
fn events_v1_error(mut e: ApiError) -> ApiError {
    if e.group.as_deref() == Some("") {
        e.group = Some("events.k8s.io".into());
        e.message = e
            .message
            .replacen("events \"", "events.events.k8s.io \"", 1)
            .replacen("Event \"", "Event.events.k8s.io \"", 1);
    }
    e
}

fn spec_of(o: &Value) -> Value {
    let mut c = o.clone();
    if let Some(m) = c.as_object_mut() {
        m.remove("metadata");
        m.remove("status");
    }
    c
}

fn old_without_rv(old: &Value, new: &Value) -> Value {
    let mut o = old.clone();
    o["metadata"]["resourceVersion"] = new["metadata"]["resourceVersion"].clone();
    if new["metadata"].get("resourceVersion").is_none()
        && let Some(m) = o["metadata"].as_object_mut()
    {
        m.remove("resourceVersion");
    }
    o
}

fn check_pod_spec_update(old: &Value, new: &Value, name: &str) -> ApiResult<()> {
    let strip = |p: &Value| {
        let mut s = p["spec"].clone();
        for list in ["containers", "initContainers"] {
            if let Some(cs) = s[list].as_array_mut() {
                for c in cs {
                    if let Some(m) = c.as_object_mut() {
                        m.remove("image");
                    }
                }
            }
        }
        if let Some(m) = s.as_object_mut() {
            for k in [
                "activeDeadlineSeconds",
                "tolerations",
                "schedulingGates",
                "terminationGracePeriodSeconds",
            ] {
                m.remove(k);
            }
        }
        s
    };
    if strip(old) != strip(new) {
        return Err(ApiError::invalid("Pod", "", name, vec![Cause {
            reason: "FieldValueForbidden".into(),
            message: "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)".into(),
            field: "spec".into(),
        }]));
    }
    Ok(())
}

/// 422 for a change to an immutable `field` of object `name` (`value`, as
/// shown, may be empty).
fn immutable(def: &ResourceDef, name: &str, field: &str, value: &str) -> ApiError {
    let shown = if value.is_empty() {
        String::new()
    } else {
        format!(" {value}:")
    };
    ApiError::invalid(
        &def.kind_qualified(),
        &def.group,
        name,
        vec![Cause {
            reason: "FieldValueInvalid".into(),
            message: format!("Invalid value:{shown} field is immutable"),
            field: field.into(),
        }],
    )
}
