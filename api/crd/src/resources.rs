//! The CustomResourceDefinitions of Trainyard's API, generated from the
//! types of this crate (kube's `CustomResource` derive and `schemars`), and
//! their YAML as `trainyard crds` prints it and `deploy/crds/` holds it.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube_core::CustomResourceExt;

use crate::{PodGroupResource, QueueResource, TopologyResource};

/// The CRDs, in a fixed order: Queue, PodGroup, Topology.
pub fn crds() -> Vec<CustomResourceDefinition> {
    vec![
        QueueResource::crd(),
        PodGroupResource::crd(),
        TopologyResource::crd(),
    ]
}

/// One CRD as a YAML document (no `---` separator), ending in a newline.
pub fn crd_yaml(crd: &CustomResourceDefinition) -> Result<String, serde_saphyr::ser::Error> {
    serde_saphyr::to_string(crd)
}

/// Every CRD as one multi-document YAML text, each document introduced by
/// `---`: what `trainyard crds` prints.
pub fn crds_yaml() -> Result<String, serde_saphyr::ser::Error> {
    let mut out = String::new();
    for crd in crds() {
        out.push_str("---\n");
        out.push_str(&crd_yaml(&crd)?);
    }
    Ok(out)
}

/// The file name under `deploy/crds/` of `crd`: `<plural>.<group>.yaml`.
pub fn file_name(crd: &CustomResourceDefinition) -> String {
    format!("{}.yaml", crd.metadata.name.as_deref().unwrap_or("unnamed"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_groups_and_scopes() {
        let got: Vec<(String, String, Vec<String>)> = crds()
            .iter()
            .map(|c| {
                (
                    c.metadata.name.clone().unwrap_or_default(),
                    c.spec.scope.clone(),
                    c.spec.names.short_names.clone().unwrap_or_default(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    "queues.trainyard.io".into(),
                    "Cluster".into(),
                    vec!["tyq".into()]
                ),
                (
                    "podgroups.trainyard.io".into(),
                    "Namespaced".into(),
                    vec!["typg".into()]
                ),
                (
                    "topologies.trainyard.io".into(),
                    "Cluster".into(),
                    vec!["tytopo".into()]
                ),
            ]
        );
    }

    #[test]
    fn every_crd_has_a_status_subresource() {
        for c in crds() {
            for v in &c.spec.versions {
                let status = v.subresources.as_ref().and_then(|s| s.status.as_ref());
                assert!(
                    status.is_some(),
                    "{:?} has no status subresource",
                    c.metadata.name
                );
            }
        }
    }
}
