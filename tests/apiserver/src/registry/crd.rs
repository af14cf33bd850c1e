//! A CRD object read as a resource definition: its group, versions,
//! names, scope, printer columns and subresources.

use serde_json::Value;

use super::*;

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// Builds the resource definition of a CRD object (`None` if it is malformed).
pub fn crd_to_def(crd: &Value) -> Option<ResourceDef> {
    let spec = &crd["spec"];
    let names = &spec["names"];
    let plural = names["plural"].as_str()?.to_string();
    let kind = names["kind"].as_str()?.to_string();
    let mut versions: Vec<VersionDef> = Vec::new();
    for v in spec["versions"].as_array()? {
        if v["served"].as_bool() == Some(false) {
            continue;
        }
        let columns = v["additionalPrinterColumns"]
            .as_array()
            .map(|cols| {
                cols.iter()
                    .map(|c| PrinterColumn {
                        name: c["name"].as_str().unwrap_or_default().into(),
                        ty: c["type"].as_str().unwrap_or("string").into(),
                        format: c["format"].as_str().unwrap_or_default().into(),
                        description: c["description"].as_str().unwrap_or_default().into(),
                        priority: c["priority"].as_i64().unwrap_or(0),
                        json_path: c["jsonPath"].as_str().unwrap_or_default().into(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let selectable = v["selectableFields"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|f| f["jsonPath"].as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        versions.push(VersionDef {
            name: v["name"].as_str()?.into(),
            schema: v["schema"].get("openAPIV3Schema").cloned(),
            columns,
            status: v["subresources"].get("status").is_some(),
            selectable,
        });
    }
    if versions.is_empty() {
        return None;
    }
    // Storage version first, as kube-apiserver prefers it in discovery.
    let storage = spec["versions"]
        .as_array()?
        .iter()
        .find(|v| v["storage"].as_bool() == Some(true))
        .and_then(|v| v["name"].as_str());
    if let Some(s) = storage {
        versions.sort_by_key(|v| v.name != s);
    }
    Some(ResourceDef {
        group: spec["group"].as_str()?.into(),
        versions,
        singular: names["singular"]
            .as_str()
            .map(String::from)
            .unwrap_or_else(|| kind.to_lowercase()),
        list_kind: names["listKind"]
            .as_str()
            .map(String::from)
            .unwrap_or_else(|| format!("{kind}List")),
        plural,
        kind,
        namespaced: spec["scope"].as_str() != Some("Cluster"),
        short_names: strings(&names["shortNames"]),
        categories: strings(&names["categories"]),
        builtin: Builtin::Custom,
    })
}
