//! `GetSnapshot`: the objects the scheduler watches, as one `List` in the
//! format `trainyard schedule` and `trainyard simulate --cluster` read
//! (docs/snapshot.md), with the config and the time of the cycle.

use serde_json::{Value, json};
use trainyard_serve::view::CycleView;

use crate::{ApiError, convert, pb};

/// `objects` as a `kind: List` YAML document.
pub fn objects_yaml(objects: Vec<Value>) -> Result<String, ApiError> {
    let list = json!({"apiVersion": "v1", "kind": "List", "items": objects});
    serde_saphyr::to_string(&list)
        .map_err(|e| ApiError::Unavailable(format!("the snapshot could not be written: {e}")))
}

/// The response: the objects, the cycle's config and time.
pub fn response(c: &CycleView, objects: Vec<Value>) -> Result<pb::GetSnapshotResponse, ApiError> {
    let config_yaml = serde_saphyr::to_string(&*c.config)
        .map_err(|e| ApiError::Unavailable(format!("the config could not be written: {e}")))?;
    Ok(pb::GetSnapshotResponse {
        cycle: Some(convert::cycle(c)),
        objects_yaml: objects_yaml(objects)?,
        config_yaml,
        now: trainyard_serve::report::rfc3339(c.now),
        writes_in_flight: u32::try_from(c.writes_in_flight).unwrap_or(u32::MAX),
    })
}
