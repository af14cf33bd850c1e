//! Typed identities carried in decisions, so that no consumer parses a
//! composed name back apart: a job's id, a pod's key (namespace, name,
//! UID), a node's name.

use std::borrow::Borrow;
use std::fmt;

use serde::{Deserialize, Serialize};

macro_rules! string_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub String);

        impl $name {
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl std::ops::Deref for $name {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                $name(s.to_string())
            }
        }

        impl From<String> for $name {
            fn from(s: String) -> Self {
                $name(s)
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }

        impl PartialEq<String> for $name {
            fn eq(&self, other: &String) -> bool {
                &self.0 == other
            }
        }

        impl PartialEq<$name> for String {
            fn eq(&self, other: &$name) -> bool {
                *self == other.0
            }
        }

        impl PartialEq<$name> for &str {
            fn eq(&self, other: &$name) -> bool {
                *self == other.0
            }
        }
    };
}

string_id!(
    /// A job's id: `namespace/name` of its group (or of its only pod) for
    /// jobs from Kubernetes objects, the workload's id in the simulator.
    JobId
);

string_id!(
    /// A node's name.
    NodeName
);

/// A pod, as the API server knows it: namespace, name and UID (empty when
/// unknown, as in hand-written files and the simulator). Displayed as
/// `namespace/name` (`name` alone without a namespace).
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskKey {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
}

impl TaskKey {
    /// A key without namespace or UID (tests, the simulator).
    pub fn named(name: impl Into<String>) -> TaskKey {
        TaskKey {
            namespace: String::new(),
            name: name.into(),
            uid: String::new(),
        }
    }
}

impl fmt::Display for TaskKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespace.is_empty() {
            f.write_str(&self.name)
        } else {
            write!(f, "{}/{}", self.namespace, self.name)
        }
    }
}

/// Compares with the displayed form, `namespace/name` (for tests and
/// messages; nothing parses it back).
impl PartialEq<str> for TaskKey {
    fn eq(&self, other: &str) -> bool {
        if self.namespace.is_empty() {
            self.name == other
        } else {
            other.len() == self.namespace.len() + 1 + self.name.len()
                && other.starts_with(self.namespace.as_str())
                && other[self.namespace.len()..].starts_with('/')
                && other.ends_with(self.name.as_str())
        }
    }
}

impl PartialEq<&str> for TaskKey {
    fn eq(&self, other: &&str) -> bool {
        *self == **other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_keys_display_and_compare_as_namespace_slash_name() {
        let k = TaskKey {
            namespace: "ml".into(),
            name: "w-0".into(),
            uid: "u1".into(),
        };
        assert_eq!(k.to_string(), "ml/w-0");
        assert!(k == "ml/w-0");
        assert!(k != "ml/w-1");
        assert!(k != "mlw-0");
        assert!(k != "m/l/w-0");
        assert_eq!(TaskKey::named("j#3").to_string(), "j#3");
        assert!(TaskKey::named("j#3") == "j#3");
    }
}
