//! The command line a kubectl user expects (issue 43): `trainyard serve
//! --kubeconfig/--context/--http-address`, a missing kubeconfig said once,
//! every problem of a settings file at once, `trainyard version` and shell
//! completion. Each through the real binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use trainyard_testapi::{Config, TestApiServer};

mod common;
use common::{free_port, gpu_node_and_pod};
use k8s_openapi::api::core::v1::Pod;

fn trainyard(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_trainyard"))
        .args(args)
        .env_remove("TRAINYARD_LOG")
        .env_remove("RUST_LOG")
        .env_remove("KUBECONFIG")
        .output()
        .expect("binary runs")
}

fn stderr(out: &Output) -> String {
    assert!(!out.status.success(), "expected a failure");
    String::from_utf8(out.stderr.clone()).expect("utf-8")
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).expect("utf-8")
}

/// A fresh directory for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("trainyard-cl-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

#[test]
fn a_missing_kubeconfig_is_said_once() {
    let out = trainyard(&["serve", "--kubeconfig", "/nonexistent/trainyard/kubeconfig"]);
    assert_eq!(
        stderr(&out),
        "error: cannot read kubeconfig /nonexistent/trainyard/kubeconfig: No such file or directory (os error 2)\n"
    );
    // The same file named by KUBECONFIG says where the name came from.
    let out = Command::new(env!("CARGO_BIN_EXE_trainyard"))
        .args(["serve"])
        .env("KUBECONFIG", "/nonexistent/trainyard/kubeconfig")
        .output()
        .expect("binary runs");
    assert_eq!(
        stderr(&out),
        "error: cannot read kubeconfig /nonexistent/trainyard/kubeconfig (KUBECONFIG): No such file or directory (os error 2)\n"
    );
    // No kubeconfig anywhere and not in a pod.
    let home = scratch("nohome");
    let out = Command::new(env!("CARGO_BIN_EXE_trainyard"))
        .args(["serve"])
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env("HOME", &home)
        .output()
        .expect("binary runs");
    assert_eq!(
        stderr(&out),
        format!(
            "error: no cluster to connect to: no --kubeconfig, KUBECONFIG is not set, {}/.kube/config does not exist, and this is not a pod in a cluster (KUBERNETES_SERVICE_HOST is not set); pass --kubeconfig FILE\n",
            home.display()
        )
    );
    let _ = std::fs::remove_dir_all(&home);
}

#[test]
fn an_unknown_context_names_the_ones_there_are() {
    let dir = scratch("context");
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, two_contexts("http://127.0.0.1:1")).expect("kubeconfig");
    let out = trainyard(&[
        "serve",
        "--kubeconfig",
        kubeconfig.to_str().expect("utf-8"),
        "--context",
        "prod",
    ]);
    assert_eq!(
        stderr(&out),
        format!(
            "error: --context prod: no such context in kubeconfig {}; it has lab, testapi\n",
            kubeconfig.display()
        )
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_settings_file_with_three_mistakes_gives_three_lines() {
    let dir = scratch("settings");
    let settings = dir.join("serve.yaml");
    std::fs::write(
        &settings,
        "service:\n  bindConcurrency: many\n  httpAddress: localhost\n  leaderElection: {enabled: maybe}\n",
    )
    .expect("settings");
    let p = settings.display().to_string();
    // Checked before any connection is tried.
    let out = trainyard(&["serve", "--config", &p, "--kubeconfig", "/nonexistent"]);
    assert_eq!(
        stderr(&out),
        format!(
            "error: {p}: service.bindConcurrency: expected a positive whole number, found \"many\"\n\
             {p}: service.leaderElection.enabled: expected true or false, found \"maybe\"\n\
             {p}: service.httpAddress: expected host:port such as 127.0.0.1:8080 (this machine only) or 0.0.0.0:8080 (every interface), found \"localhost\"\n"
        )
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_bad_http_address_on_the_command_line_says_what_is_expected() {
    let out = trainyard(&["serve", "--http-address", "localhost"]);
    let e = stderr(&out);
    assert!(
        e.starts_with("error: invalid value 'localhost' for '--http-address <ADDR>': expected host:port: 127.0.0.1:8080 (this machine only), 0.0.0.0:8080 (every interface), or \"\" for none\n"),
        "{e}"
    );
}

#[test]
fn version_prints_the_crate_version_as_text_and_json() {
    let text = stdout(&trainyard(&["version"]));
    let want = format!("trainyard {}", env!("CARGO_PKG_VERSION"));
    // `(commit ...)` follows when the build was given TRAINYARD_GIT_COMMIT.
    assert!(
        text == format!("{want}\n") || text.starts_with(&format!("{want} (commit ")),
        "{text}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&stdout(&trainyard(&["version", "-o", "json"]))).expect("JSON");
    assert_eq!(json["version"], env!("CARGO_PKG_VERSION"));
    assert!(
        json["commit"].is_null() || json["commit"].is_string(),
        "{json}"
    );
    // clap's --version says the same version.
    assert_eq!(stdout(&trainyard(&["--version"])), format!("{want}\n"));
}

#[test]
fn completion_scripts_for_bash_zsh_and_fish_and_help_on_installing_them() {
    let bash = stdout(&trainyard(&["completion", "bash"]));
    assert!(bash.contains("_trainyard()"), "{bash}");
    for word in [
        "serve",
        "usage",
        "--kubeconfig",
        "--http-address",
        "completion",
    ] {
        assert!(bash.contains(word), "bash completion lacks {word}");
    }
    let zsh = stdout(&trainyard(&["completion", "zsh"]));
    assert!(zsh.starts_with("#compdef trainyard"), "{zsh}");
    let fish = stdout(&trainyard(&["completion", "fish"]));
    assert!(fish.contains("complete -c trainyard"), "{fish}");
    // The bash script loads and registers itself (where bash is there).
    if let Ok(out) = Command::new("bash")
        .args(["-c", "source /dev/stdin; complete -p trainyard"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child
                .stdin
                .take()
                .map(|mut i| i.write_all(bash.as_bytes()))
                .transpose()?;
            child.wait_with_output()
        })
    {
        let registered = String::from_utf8_lossy(&out.stdout);
        assert!(registered.contains("trainyard"), "{registered}");
    }
    let help = stdout(&trainyard(&["completion", "--help"]));
    for how in [
        "source <(trainyard completion bash)",
        "trainyard completion zsh > ~/.zfunc/_trainyard",
        "trainyard completion fish > ~/.config/fish/completions/trainyard.fish",
    ] {
        assert!(help.contains(how), "completion --help lacks {how}:\n{help}");
    }
    let e = stderr(&trainyard(&["completion", "tcsh"]));
    assert!(
        e.contains("invalid value 'tcsh'") && e.contains("[possible values: bash, zsh, fish]"),
        "{e}"
    );
}

/// A kubeconfig whose current context (`lab`) points at `lab_url` and
/// whose `testapi` context is the test server's.
fn two_contexts(lab_url: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: lab\nclusters:\n- name: lab\n  cluster: {{server: '{lab_url}'}}\n- name: testapi\n  cluster: {{server: '{{TEST}}'}}\ncontexts:\n- name: testapi\n  context: {{cluster: testapi, user: u, namespace: default}}\n- name: lab\n  context: {{cluster: lab, user: u}}\nusers:\n- name: u\n  user: {{}}\n"
    )
}

fn http_get(port: u16, path: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut body = String::new();
    s.read_to_string(&mut body).ok()?;
    Some(body)
}

fn serve(args: &[&str], dir: &Path) -> tokio::process::Child {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_trainyard"))
        .arg("serve")
        .args(args)
        // Neither the environment's kubeconfig nor ~/.kube/config: only the flags.
        .env_remove("KUBECONFIG")
        .env("HOME", dir)
        .env_remove("TRAINYARD_LOG")
        .env_remove("RUST_LOG")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("trainyard serve starts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_connects_with_the_kubeconfig_and_context_given_and_serves_where_told() {
    let server = TestApiServer::start(Config::default())
        .await
        .expect("the test API server starts");
    let client = kube::Client::try_from(kube::Config::new(
        server.url().parse().expect("the server's URL"),
    ))
    .expect("a client");
    let dir = scratch("serve");
    // The current context points at nothing: only --context reaches the
    // test server.
    let kubeconfig = dir.join("lab-kubeconfig");
    std::fs::write(
        &kubeconfig,
        two_contexts("http://127.0.0.1:1").replace("{TEST}", &server.url()),
    )
    .expect("kubeconfig");
    let pods = gpu_node_and_pod(&client, 2).await;
    let port = free_port();
    let address = format!("127.0.0.1:{port}");
    let mut child = serve(
        &[
            "--leader-elect=false",
            "--kubeconfig",
            kubeconfig.to_str().expect("utf-8"),
            "--context",
            "testapi",
            "--http-address",
            &address,
        ],
        &dir,
    );
    let bound = |p: Option<&Pod>| {
        p.and_then(|p| p.spec.as_ref())
            .is_some_and(|s| s.node_name.is_some())
    };
    tokio::time::timeout(
        Duration::from_secs(30),
        kube::runtime::wait::await_condition(pods.clone(), "train-0", bound),
    )
    .await
    .expect("the pod is bound within 30 s through the context given")
    .expect("the pod watch");
    let health = tokio::task::spawn_blocking(move || http_get(port, "/healthz"))
        .await
        .expect("the request ran")
        .expect("/healthz answers on --http-address");
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    child.kill().await.expect("killed");
    let _ = std::fs::remove_dir_all(&dir);
}
