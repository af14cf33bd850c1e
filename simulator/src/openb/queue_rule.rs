//! Queue assignment: the trace has no teams, so the queue is made up.

use super::*;

/// How pods are assigned to queues. The trace has no users, teams or
/// namespaces, so the queue is made up; pick the rule that fits the
/// experiment.
///
/// CLI syntax ([`FromStr`], and [`fmt::Display`] writes it back):
///
/// * `single:<queue>`: every pod in one queue.
/// * `qos:LS=prod,Guaranteed=prod,Burstable=research,BE=dev`: by the pod's
///   `qos` value. An entry `default=<queue>` catches values not listed;
///   without it an unlisted value is an error ([`OpenbError::UnmappedQos`]).
/// * `hash:team-a,team-b,team-c`: by [`fnv1a64`] of the pod name modulo the
///   number of queues: a stable, roughly even spread, identical on every
///   platform. A queue listed twice gets twice the share.
///
/// Queue names must be DNS-1123 subdomains (lowercase letters, digits, `-`
/// and `.`), like the names of Queue documents.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum QueueRule {
    Single(String),
    ByQos(BTreeMap<String, String>),
    Hash { queues: Vec<String> },
}

/// The `qos` key of [`QueueRule::ByQos`] and of
/// [`ImportOptions::priority_by_qos`] that catches unlisted values.
pub const QOS_DEFAULT_KEY: &str = "default";

impl QueueRule {
    /// The queue of a pod, or `None` when the rule does not say (a `qos`
    /// with no entry and no `default`, or a hash rule with no queues).
    pub fn queue_for(&self, pod_name: &str, qos: &str) -> Option<&str> {
        match self {
            QueueRule::Single(q) => Some(q),
            QueueRule::ByQos(map) => map
                .get(qos)
                .or_else(|| map.get(QOS_DEFAULT_KEY))
                .map(String::as_str),
            QueueRule::Hash { queues } => {
                if queues.is_empty() {
                    return None;
                }
                let n = queues.len() as u64;
                let i = fnv1a64(pod_name.as_bytes()) % n;
                queues.get(usize::try_from(i).ok()?).map(String::as_str)
            }
        }
    }
}

impl Default for QueueRule {
    /// `single:default`.
    fn default() -> Self {
        QueueRule::Single("default".to_string())
    }
}

impl fmt::Display for QueueRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QueueRule::Single(q) => write!(f, "single:{q}"),
            QueueRule::ByQos(map) => {
                f.write_str("qos:")?;
                for (i, (k, v)) in map.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{k}={v}")?;
                }
                Ok(())
            }
            QueueRule::Hash { queues } => write!(f, "hash:{}", queues.join(",")),
        }
    }
}

/// Why a [`QueueRule`] string did not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid queue rule `{input}`: {problem}; expected `single:<queue>`, `qos:<qos>=<queue>,...` or `hash:<queue>,<queue>,...`"
)]
pub struct ParseQueueRuleError {
    pub input: String,
    pub problem: String,
}

fn check_queue_name(name: &str) -> Result<(), String> {
    match dns1123_subdomain_problem(name) {
        None => Ok(()),
        Some(p) => Err(format!("queue name {p}")),
    }
}

impl FromStr for QueueRule {
    type Err = ParseQueueRuleError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = |problem: String| ParseQueueRuleError {
            input: s.to_string(),
            problem,
        };
        let Some((kind, rest)) = s.trim().split_once(':') else {
            return Err(err("no `:` after the kind".to_string()));
        };
        match kind.trim() {
            "single" => {
                let q = rest.trim();
                check_queue_name(q).map_err(err)?;
                Ok(QueueRule::Single(q.to_string()))
            }
            "qos" => {
                let mut map = BTreeMap::new();
                for entry in rest.split(',') {
                    let Some((k, v)) = entry.split_once('=') else {
                        return Err(err(format!(
                            "entry `{}` is not `<qos>=<queue>`",
                            entry.trim()
                        )));
                    };
                    let (k, v) = (k.trim(), v.trim());
                    if k.is_empty() || k.chars().any(char::is_whitespace) {
                        return Err(err(format!(
                            "entry `{}`: the qos value must be non-empty without spaces",
                            entry.trim()
                        )));
                    }
                    check_queue_name(v).map_err(err)?;
                    if map.insert(k.to_string(), v.to_string()).is_some() {
                        return Err(err(format!("qos `{k}` is mapped twice")));
                    }
                }
                Ok(QueueRule::ByQos(map))
            }
            "hash" => {
                let mut queues = Vec::new();
                for q in rest.split(',') {
                    let q = q.trim();
                    check_queue_name(q).map_err(err)?;
                    queues.push(q.to_string());
                }
                Ok(QueueRule::Hash { queues })
            }
            other => Err(err(format!("unknown kind `{other}`"))),
        }
    }
}
