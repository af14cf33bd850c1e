//! Whether a job may be evicted by reclaim or preemption: the values of the
//! preemptibility keys and the default by priority. The snapshot loader
//! resolves a job's preemptibility from, in order: the PodGroup's
//! `spec.preemptible`, then each key of [`keys::PREEMPTIBLE_KEYS`] on the
//! PodGroup and then on the gang's pods, then [`default_preemptible`].
//! See `docs/preemption-api.md`.

use crate::ObjectMeta;
use crate::keys::{self, KeyPlace};

/// Jobs with at least this priority are not preemptible unless they say
/// so. KAI-Scheduler's convention: its `build` (100) and `inference` (125)
/// priority classes are non-preemptible, `train` (50) and
/// `build-preemptible` (75) are preemptible. The rule lives in the model,
/// so that jobs built in code behave like loaded ones.
pub use trainyard_model::job::{NON_PREEMPTIBLE_PRIORITY, default_preemptible};

/// The value of a preemptibility key: exactly `true` or `false`.
pub fn parse_preemptible(value: &str) -> Result<bool, String> {
    match value {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(format!(
            "invalid value {value:?}; expected \"true\" or \"false\""
        )),
    }
}

/// One preemptibility key found on an object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreemptibleMark {
    /// The key, e.g. `trainyard.io/preemptible`.
    pub key: &'static str,
    /// Where it was read: `metadata.labels.<key>` or
    /// `metadata.annotations.<key>`.
    pub field: String,
    /// The value as written.
    pub text: String,
    /// The value, or why it is not `true`/`false`.
    pub value: Result<bool, String>,
}

/// The preemptibility keys set on `meta`, in precedence order
/// ([`keys::PREEMPTIBLE_KEYS`]; each read as a label, then an annotation;
/// empty values count as absent).
pub fn preemptible_marks(meta: &ObjectMeta) -> Vec<PreemptibleMark> {
    keys::PREEMPTIBLE_KEYS
        .iter()
        .filter_map(|(key, place)| {
            let text = meta.lookup(key, *place)?;
            let label = match place {
                KeyPlace::Label => true,
                KeyPlace::Annotation => false,
                KeyPlace::LabelOrAnnotation => meta.lookup(key, KeyPlace::Label).is_some(),
            };
            let field = if label {
                format!("metadata.labels.{key}")
            } else {
                format!("metadata.annotations.{key}")
            };
            Some(PreemptibleMark {
                key,
                field,
                text: text.to_string(),
                value: parse_preemptible(text),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn default_follows_kai_priority_classes() {
        // KAI-Scheduler: train 50, build-preemptible 75, build 100, inference 125.
        assert!(default_preemptible(50));
        assert!(default_preemptible(75));
        assert!(default_preemptible(99));
        assert!(!default_preemptible(100));
        assert!(!default_preemptible(125));
        assert!(default_preemptible(0));
        assert!(default_preemptible(i32::MIN));
        assert!(!default_preemptible(i32::MAX));
    }

    #[test]
    fn values_are_true_or_false_exactly() {
        assert_eq!(parse_preemptible("true"), Ok(true));
        assert_eq!(parse_preemptible("false"), Ok(false));
        for bad in ["True", "yes", "1", " true", "FALSE"] {
            assert_eq!(
                parse_preemptible(bad),
                Err(format!(
                    "invalid value {bad:?}; expected \"true\" or \"false\""
                ))
            );
        }
    }

    #[test]
    fn marks_in_precedence_order_label_first() {
        let meta = ObjectMeta {
            labels: BTreeMap::from([(keys::PREEMPTIBLE.to_string(), "false".to_string())]),
            annotations: BTreeMap::from([
                (keys::PREEMPTIBLE.to_string(), "true".to_string()),
                (keys::VOLCANO_PREEMPTABLE.to_string(), "maybe".to_string()),
            ]),
            ..ObjectMeta::default()
        };
        let marks = preemptible_marks(&meta);
        assert_eq!(marks.len(), 2);
        assert_eq!(marks[0].key, "trainyard.io/preemptible");
        assert_eq!(marks[0].field, "metadata.labels.trainyard.io/preemptible");
        assert_eq!(marks[0].value, Ok(false));
        assert_eq!(
            marks[1].field,
            "metadata.annotations.volcano.sh/preemptable"
        );
        assert_eq!(
            marks[1].value,
            Err("invalid value \"maybe\"; expected \"true\" or \"false\"".to_string())
        );
        // Empty values count as absent.
        let meta = ObjectMeta {
            annotations: BTreeMap::from([(keys::PREEMPTIBLE.to_string(), String::new())]),
            ..ObjectMeta::default()
        };
        assert!(preemptible_marks(&meta).is_empty());
    }
}
