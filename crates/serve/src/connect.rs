//! Where the cluster is: the one way `trainyard serve` (and every test
//! that runs the service against a kubeconfig) builds its kube client
//! configuration, as kubectl finds it: `--kubeconfig FILE`, else
//! `KUBECONFIG` (a list of files, merged), else `~/.kube/config`, else the
//! in-cluster service account; `--context NAME` picks a context of the
//! kubeconfig instead of its `current-context`.
//!
//! Every failure is said once, in one line, naming the file and what is
//! wrong with it (kube-rs's own errors repeat their cause two or three
//! times when printed with their sources).

use std::path::{Path, PathBuf};

use kube::config::{KubeConfigOptions, Kubeconfig, KubeconfigError};

/// Where to find the cluster (`trainyard serve --kubeconfig`, `--context`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterOptions {
    /// A kubeconfig file; `None`: `KUBECONFIG`, else `~/.kube/config`,
    /// else in-cluster.
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig's context to use; `None`: its `current-context`.
    pub context: Option<String>,
}

/// A kubeconfig read from somewhere, and how to name it in messages.
struct Found {
    config: Kubeconfig,
    /// `kubeconfig FILE` or `kubeconfig FILE (KUBECONFIG)`.
    named: String,
}

/// The kube client configuration `opts` name (see the module docs), with
/// kube's default retry layer still on (the caller decides).
pub async fn kube_config(opts: &ClusterOptions) -> Result<kube::Config, String> {
    let found = match &opts.kubeconfig {
        Some(path) => Some(Found {
            config: read(path, "")?,
            named: format!("kubeconfig {}", path.display()),
        }),
        None => from_environment()?,
    };
    let Some(found) = found else {
        if let Some(context) = &opts.context {
            return Err(format!(
                "--context {context}: no kubeconfig to take it from (KUBECONFIG is not set and {} does not exist); pass --kubeconfig FILE",
                default_path().map_or("~/.kube/config".into(), |p| p.display().to_string())
            ));
        }
        let home = default_path().map_or("~/.kube/config".into(), |p| p.display().to_string());
        if std::env::var_os("KUBERNETES_SERVICE_HOST").is_none() {
            return Err(format!(
                "no cluster to connect to: no --kubeconfig, KUBECONFIG is not set, {home} does not exist, and this is not a pod in a cluster (KUBERNETES_SERVICE_HOST is not set); pass --kubeconfig FILE"
            ));
        }
        return kube::Config::incluster().map_err(|e| {
            format!(
                "no kubeconfig (KUBECONFIG is not set, {home} does not exist), and the pod's service account cannot be used: {e}"
            )
        });
    };
    if let Some(context) = &opts.context
        && !found.config.contexts.iter().any(|c| &c.name == context)
    {
        let mut names: Vec<&str> = found
            .config
            .contexts
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        names.sort_unstable();
        let has = if names.is_empty() {
            "it has none".to_string()
        } else {
            format!("it has {}", names.join(", "))
        };
        return Err(format!(
            "--context {context}: no such context in {}; {has}",
            found.named
        ));
    }
    let options = KubeConfigOptions {
        context: opts.context.clone(),
        ..KubeConfigOptions::default()
    };
    kube::Config::from_custom_kubeconfig(found.config, &options)
        .await
        .map_err(|e| format!("{}: {}", found.named, plain(&e)))
}

/// `KUBECONFIG` (every file of the list, merged), else `~/.kube/config`
/// when it exists; `None`: neither.
fn from_environment() -> Result<Option<Found>, String> {
    if let Some(value) = std::env::var_os("KUBECONFIG") {
        let paths: Vec<PathBuf> = std::env::split_paths(&value)
            .filter(|p| !p.as_os_str().is_empty())
            .collect();
        if !paths.is_empty() {
            let mut merged = Kubeconfig::default();
            for p in &paths {
                merged = merged
                    .merge(read(p, " (KUBECONFIG)")?)
                    .map_err(|e| format!("KUBECONFIG: {}", plain(&e)))?;
            }
            let named = paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(":");
            return Ok(Some(Found {
                config: merged,
                named: format!("kubeconfig {named} (KUBECONFIG)"),
            }));
        }
    }
    match default_path() {
        Some(p) if p.exists() => Ok(Some(Found {
            config: read(&p, "")?,
            named: format!("kubeconfig {}", p.display()),
        })),
        _ => Ok(None),
    }
}

fn default_path() -> Option<PathBuf> {
    std::env::home_dir().map(|h| h.join(".kube").join("config"))
}

/// Reads the kubeconfig at `path`; `whence` follows its name in errors.
fn read(path: &Path, whence: &str) -> Result<Kubeconfig, String> {
    let shown = path.display();
    // Read here first: kube's error for a missing file names the path in
    // Rust's debug quoting and repeats the cause.
    if let Err(e) = std::fs::metadata(path) {
        return Err(format!("cannot read kubeconfig {shown}{whence}: {e}"));
    }
    Kubeconfig::read_from(path).map_err(|e| match e {
        KubeconfigError::ReadConfig(io, _) => {
            format!("cannot read kubeconfig {shown}{whence}: {io}")
        }
        other => format!("kubeconfig {shown}{whence}: {}", plain(&other)),
    })
}

/// A kubeconfig error in one line, without its cause repeated.
fn plain(e: &KubeconfigError) -> String {
    match e {
        KubeconfigError::LoadContext(name) => {
            format!("its context \"{name}\" is not defined")
        }
        KubeconfigError::CurrentContextNotSet => {
            "it has no current-context; pass --context NAME".to_string()
        }
        KubeconfigError::LoadClusterOfContext(name) => {
            format!("the cluster \"{name}\" of the context is not defined")
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO: &str = "apiVersion: v1\nkind: Config\ncurrent-context: a\nclusters:\n- name: a\n  cluster: {server: 'http://127.0.0.1:1'}\n- name: b\n  cluster: {server: 'http://127.0.0.1:2'}\ncontexts:\n- name: a\n  context: {cluster: a, user: u}\n- name: b\n  context: {cluster: b, user: u, namespace: ml}\nusers:\n- name: u\n  user: {}\n";

    fn file(name: &str, text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join(name);
        std::fs::write(&path, text).expect("written");
        (dir, path)
    }

    #[tokio::test]
    async fn a_context_of_a_kubeconfig_is_chosen_by_name() {
        let (_dir, path) = file("kc", TWO);
        let opts = |context: Option<&str>| ClusterOptions {
            kubeconfig: Some(path.clone()),
            context: context.map(str::to_string),
        };
        let current = kube_config(&opts(None)).await.expect("current context");
        assert_eq!(current.cluster_url.to_string(), "http://127.0.0.1:1/");
        let b = kube_config(&opts(Some("b"))).await.expect("context b");
        assert_eq!(b.cluster_url.to_string(), "http://127.0.0.1:2/");
        assert_eq!(b.default_namespace, "ml");
        let e = kube_config(&opts(Some("c"))).await.expect_err("no c");
        assert_eq!(
            e,
            format!(
                "--context c: no such context in kubeconfig {}; it has a, b",
                path.display()
            )
        );
    }

    #[tokio::test]
    async fn a_missing_or_broken_kubeconfig_is_said_once() {
        let missing = PathBuf::from("/nonexistent/trainyard/kubeconfig");
        let e = kube_config(&ClusterOptions {
            kubeconfig: Some(missing),
            context: None,
        })
        .await
        .expect_err("missing");
        expect_test::expect![[r#"cannot read kubeconfig /nonexistent/trainyard/kubeconfig: No such file or directory (os error 2)"#]]
            .assert_eq(&e);
        let (_dir, path) = file("kc", "apiVersion: v1\nkind: Config\ncurrent-context: x\n");
        let e = kube_config(&ClusterOptions {
            kubeconfig: Some(path.clone()),
            context: None,
        })
        .await
        .expect_err("no such context");
        assert_eq!(
            e,
            format!(
                "kubeconfig {}: its context \"x\" is not defined",
                path.display()
            )
        );
    }
}
