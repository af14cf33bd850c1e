//! Object metadata helpers shared by the loader's modules: which of
//! several keys a label or annotation uses, the field path of a key, and
//! lists of names in messages.

use trainyard_crd::ObjectMeta;
use trainyard_crd::keys::{self, KeyPlace};

/// At most this many names are listed in one message.
pub(crate) const LIST_MAX: usize = 5;

pub(crate) fn list_names(names: &[String]) -> String {
    let mut s = names
        .iter()
        .take(LIST_MAX)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > LIST_MAX {
        s.push_str(&format!(" and {} more", names.len() - LIST_MAX));
    }
    s
}

/// A key and the value found under it.
pub(crate) type KeyValue<'m> = (&'static str, &'m str);

/// The first present value among `keys` (with its key and where it is
/// read from) and every other present value (key, value) that differs
/// from it.
pub(crate) fn first_of<'m>(
    meta: &'m ObjectMeta,
    keys: &[(&'static str, KeyPlace)],
) -> Option<(&'static str, KeyPlace, &'m str, Vec<KeyValue<'m>>)> {
    let mut found = keys
        .iter()
        .filter_map(|(k, place)| meta.lookup(k, *place).map(|v| (*k, *place, v)));
    let (k, place, v) = found.next()?;
    let others = found
        .filter(|(_, _, o)| *o != v)
        .map(|(k, _, o)| (k, o))
        .collect();
    Some((k, place, v, others))
}

/// Where the value of `key` looked up as `place` was found:
/// `metadata.labels.<key>` or `metadata.annotations.<key>`.
pub(crate) fn meta_field(meta: &ObjectMeta, key: &str, place: KeyPlace) -> String {
    let label = match place {
        KeyPlace::Label => true,
        KeyPlace::Annotation => false,
        KeyPlace::LabelOrAnnotation => meta.lookup(key, KeyPlace::Label).is_some(),
    };
    if label {
        format!("metadata.labels.{key}")
    } else {
        format!("metadata.annotations.{key}")
    }
}

/// Keys of a pod that are read "label, then annotation" (among others).
pub(crate) const POD_KEYS: &[&[(&str, KeyPlace)]] = &[
    keys::POD_GROUP_KEYS,
    keys::QUEUE_KEYS,
    &[(keys::SUB_GROUP, KeyPlace::LabelOrAnnotation)],
    keys::PREEMPTIBLE_KEYS,
];

/// For each of `key_lists`' keys read "label, then annotation" that is set
/// to different non-empty values as a label and as an annotation: a
/// message saying the label wins.
pub(crate) fn label_annotation_conflicts(
    meta: &ObjectMeta,
    key_lists: &[&[(&str, KeyPlace)]],
) -> Vec<String> {
    key_lists
        .iter()
        .flat_map(|list| list.iter())
        .filter(|(_, place)| *place == KeyPlace::LabelOrAnnotation)
        .filter_map(|(key, _)| {
            let label = meta.lookup(key, KeyPlace::Label)?;
            let annotation = meta.lookup(key, KeyPlace::Annotation)?;
            (label != annotation).then(|| {
                format!(
                    "label {key}={label:?} and annotation {key}={annotation:?} differ; using the label's {label:?}"
                )
            })
        })
        .collect()
}
