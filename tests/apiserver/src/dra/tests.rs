use serde_json::json;

use super::*;

#[test]
fn placeholder() {
    assert!(causes(Builtin::DeviceClass, &json!({}), None).is_empty());
}
