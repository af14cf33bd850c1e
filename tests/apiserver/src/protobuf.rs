//! Just enough of Kubernetes' protobuf encoding to read the one body kubectl
//! sends only as protobuf and tests need: the `SelfSubjectAccessReview` of
//! `kubectl auth can-i`. Every other protobuf body still gets 415.

use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult};
use crate::http::Req;

/// One field of a message: its number and, for length-delimited fields, the bytes.
type Field<'a> = (u64, Option<&'a [u8]>);

fn varint(b: &[u8], i: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*i)?;
        *i += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

fn fields(b: &[u8]) -> Option<Vec<Field<'_>>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let key = varint(b, &mut i)?;
        let (num, wire) = (key >> 3, key & 7);
        match wire {
            0 => {
                varint(b, &mut i)?;
                out.push((num, None));
            }
            1 => {
                i += 8;
                out.push((num, None));
            }
            2 => {
                let len = usize::try_from(varint(b, &mut i)?).ok()?;
                let end = i.checked_add(len).filter(|e| *e <= b.len())?;
                out.push((num, Some(&b[i..end])));
                i = end;
            }
            5 => {
                i += 4;
                out.push((num, None));
            }
            _ => return None,
        }
    }
    (i == b.len()).then_some(out)
}

fn field<'a>(fs: &[Field<'a>], n: u64) -> Option<&'a [u8]> {
    fs.iter().rev().find(|(k, _)| *k == n).and_then(|(_, v)| *v)
}

fn strings(b: &[u8], names: &[(u64, &str)]) -> Option<Value> {
    let fs = fields(b)?;
    let mut o = serde_json::Map::new();
    for (n, name) in names {
        if let Some(v) = field(&fs, *n) {
            o.insert(
                name.to_string(),
                json!(String::from_utf8_lossy(v).into_owned()),
            );
        }
    }
    Some(Value::Object(o))
}

/// Decodes a protobuf `authorization.k8s.io/v1 SelfSubjectAccessReview`
/// (the `k8s\0` envelope around a `runtime.Unknown`) into its JSON form.
pub fn decode_ssar(body: &[u8]) -> Option<Value> {
    let unknown = fields(body.strip_prefix(b"k8s\0")?)?;
    let review = fields(field(&unknown, 2)?)?;
    let spec = fields(field(&review, 2).unwrap_or(&[]))?;
    let mut out_spec = json!({});
    if let Some(ra) = field(&spec, 1) {
        out_spec["resourceAttributes"] = strings(
            ra,
            &[
                (1, "namespace"),
                (2, "verb"),
                (3, "group"),
                (4, "version"),
                (5, "resource"),
                (6, "subresource"),
                (7, "name"),
            ],
        )?;
    }
    if let Some(na) = field(&spec, 2) {
        out_spec["nonResourceAttributes"] = strings(na, &[(1, "path"), (2, "verb")])?;
    }
    Some(
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "spec": out_spec}),
    )
}

/// The body of a SelfSubjectAccessReview create, JSON or protobuf.
pub fn ssar_body(r: &Req) -> ApiResult<Value> {
    if r.content_type.contains("protobuf") {
        return decode_ssar(&r.body).ok_or_else(|| {
            ApiError::bad_request("unable to decode the SelfSubjectAccessReview protobuf body")
        });
    }
    r.json()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_kubectl_auth_can_i_body() {
        // What kubectl 1.32 sends for `auth can-i create pods/binding -n default`.
        let body: &[u8] = b"k8s\x00\n2\n\x17authorization.k8s.io/v1\x12\x17SelfSubjectAccessReview\x12F\n\x10\n\x00\x12\x00\x1a\x00\"\x00*\x002\x008\x00B\x00\x12(\n&\n\x07default\x12\x06create\x1a\x00\"\x00*\x04pods2\x00:\x07binding\x1a\x08\x08\x00\x12\x00\x1a\x00 \x00\x1a\x00\"\x00";
        let v = decode_ssar(body).expect("decodes");
        let ra = &v["spec"]["resourceAttributes"];
        assert_eq!(ra["namespace"], "default");
        assert_eq!(ra["verb"], "create");
        assert_eq!(ra["resource"], "pods");
        assert_eq!(ra["name"], "binding");
        assert_eq!(ra["subresource"], "");
        assert!(decode_ssar(b"k8s\x00\xff").is_none());
    }
}
