//! The verbs that ask the running scheduler over TLS with Kubernetes
//! tokens required, end to end: the real `trainyard` binary against the
//! secured API on loopback (certificates, users and RBAC from the shared
//! test support), its refusals and the tokens it takes from a kubeconfig.

mod remote_common;
#[path = "../../api/tests/support/mod.rs"]
mod support;

use expect_test::expect;
use remote_common::{Said, bin, run_program, stable};

/// The verbs over `https://` against the API with TLS and tokens
/// required: what alice may see, what she may not, no token, a CA that
/// did not sign the scheduler's certificate, and the token from a
/// kubeconfig user.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verbs_over_tls_with_tokens() {
    let cluster = support::secure::secure_cluster().await;
    let secure = support::secure::start_secure_service(&cluster).await;
    let server = format!("https://127.0.0.1:{}", secure.running.port);
    let ca = secure.certificates.ca.display().to_string();
    let other_ca = secure.certificates.other_ca.display().to_string();
    let run = |args: &[&str], env: Vec<(String, String)>| {
        let mut all: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        all.extend(["--server".into(), server.clone()]);
        run_program(bin(), all, env)
    };
    // Never a panic nor Rust's debug output, whatever is refused.
    let clean = |said: &Said| {
        assert!(
            !said.stderr.contains("panicked") && !said.stderr.contains("RUST_BACKTRACE"),
            "{}",
            said.stderr
        );
        assert!(
            said.stdout.is_empty(),
            "nothing on stdout when refused: {}",
            said.stdout
        );
    };

    // jobs -A for alice: only namespace a's (b's are omitted).
    let said = run(
        &[
            "jobs",
            "-A",
            "--certificate-authority",
            &ca,
            "--token",
            &cluster.alice,
        ],
        vec![],
    )
    .await;
    assert!(said.ok, "{}", said.stderr);
    expect![[r#"
        NAMESPACE  NAME   QUEUE    STATE    PODS  GPUS  AGE  REASON
        a          train  default  Running  1/1   2/2   AGE   -
    "#]]
    .assert_eq(&stable(&said.stdout));
    // The auditor lists every namespace (TRAINYARD_TOKEN).
    let said = run(
        &["jobs", "-A", "--certificate-authority", &ca],
        vec![("TRAINYARD_TOKEN".into(), cluster.auditor.clone())],
    )
    .await;
    assert!(said.ok, "{}", said.stderr);
    let names: Vec<&str> = said
        .stdout
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().nth(1))
        .collect();
    assert_eq!(names, ["train", "secret", "wait"], "{}", said.stdout);

    // explain b/wait for alice: not authorized, naming the namespace and
    // the permission.
    let said = run(
        &[
            "explain",
            "b/wait",
            "--certificate-authority",
            &ca,
            "--token",
            &cluster.alice,
        ],
        vec![],
    )
    .await;
    assert!(
        !said.ok && said.code.is_some_and(|c| c != 0),
        "{:?}",
        said.code
    );
    clean(&said);
    expect![[r#"
        error: not authorized: user "alice" may not explain job b/wait: it needs `get pods` in namespace "b" (check with `kubectl auth can-i get pods -n b --as alice`)
    "#]]
    .assert_eq(&said.stderr);
    // The same for `jobs -n b`.
    let said = run(
        &[
            "jobs",
            "-n",
            "b",
            "--certificate-authority",
            &ca,
            "--token",
            &cluster.alice,
        ],
        vec![],
    )
    .await;
    assert!(!said.ok);
    clean(&said);
    assert!(
        said.stderr.starts_with("error: not authorized: ")
            && said.stderr.contains("`list pods` in namespace \"b\""),
        "{}",
        said.stderr
    );

    // No token: not authenticated, and what to do.
    let said = run(&["queues", "--certificate-authority", &ca], vec![]).await;
    assert!(!said.ok && said.code.is_some_and(|c| c != 0));
    clean(&said);
    assert!(
        said.stderr.starts_with("error: not authenticated: ")
            && said.stderr.ends_with(&format!(
                "(the scheduler at {server} wants a Kubernetes token: pass --token, set TRAINYARD_TOKEN, or use a kubeconfig user with a token)\n"
            )),
        "{}",
        said.stderr
    );
    // A token the API server does not know: not authenticated.
    let said = run(
        &[
            "queues",
            "--certificate-authority",
            &ca,
            "--token",
            "not-a-token",
        ],
        vec![],
    )
    .await;
    assert!(!said.ok);
    clean(&said);
    assert!(
        said.stderr.starts_with("error: not authenticated: "),
        "{}",
        said.stderr
    );

    // A CA that did not sign the scheduler's certificate: a TLS error
    // that says so and what to do.
    let said = run(
        &[
            "jobs",
            "-A",
            "--certificate-authority",
            &other_ca,
            "--token",
            &cluster.alice,
        ],
        vec![],
    )
    .await;
    assert!(!said.ok && said.code.is_some_and(|c| c != 0));
    clean(&said);
    assert_eq!(
        said.stderr,
        format!(
            "error: the scheduler's certificate at {server} is not trusted: it is not signed by a CA in --certificate-authority {other_ca} (pass --certificate-authority FILE with the CA that signed it, or --insecure-skip-tls-verify for a test)\n"
        )
    );
    // Not checked at all: answers.
    let said = run(
        &[
            "jobs",
            "-A",
            "--insecure-skip-tls-verify",
            "--token",
            &cluster.alice,
        ],
        vec![],
    )
    .await;
    assert!(said.ok, "{}", said.stderr);
    assert!(said.stdout.contains("train"), "{}", said.stdout);

    // The token of the kubeconfig's user (its context's namespace, a, is
    // the default of `jobs`).
    let kubeconfig = secure.running.dir.path().join("kubeconfig");
    let token_file = secure.running.dir.path().join("token");
    std::fs::write(&token_file, format!("{}\n", cluster.alice)).expect("written");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {}\ncontexts:\n- name: alice\n  context:\n    cluster: c\n    user: alice\n    namespace: a\n- name: nobody\n  context:\n    cluster: c\n    user: nobody\n    namespace: b\n- name: file\n  context:\n    cluster: c\n    user: file\ncurrent-context: alice\nusers:\n- name: alice\n  user:\n    token: {}\n- name: nobody\n  user: {{}}\n- name: file\n  user:\n    tokenFile: {}\n",
            cluster.server.url(),
            cluster.alice,
            token_file.display()
        ),
    )
    .expect("written");
    let kc = kubeconfig.display().to_string();
    let said = run(
        &["jobs", "--kubeconfig", &kc, "--certificate-authority", &ca],
        vec![],
    )
    .await;
    assert!(said.ok, "{}", said.stderr);
    expect![[r#"
        NAME   QUEUE    STATE    PODS  GPUS  AGE  REASON
        train  default  Running  1/1   2/2   AGE   -
    "#]]
    .assert_eq(&stable(&said.stdout));
    let said = run(
        &[
            "explain",
            "a/train",
            "--kubeconfig",
            &kc,
            "--certificate-authority",
            &ca,
        ],
        vec![],
    )
    .await;
    assert!(said.ok, "{}", said.stderr);
    assert!(
        said.stdout.starts_with("Job:     a/train\n"),
        "{}",
        said.stdout
    );
    // A user's tokenFile.
    let said = run(
        &[
            "jobs",
            "-n",
            "a",
            "--kubeconfig",
            &kc,
            "--context",
            "file",
            "--certificate-authority",
            &ca,
        ],
        vec![],
    )
    .await;
    assert!(said.ok, "{}", said.stderr);
    assert!(said.stdout.contains("train"), "{}", said.stdout);
    // A kubeconfig named that cannot be read: said, not taken for none.
    let missing = secure.running.dir.path().join("no-such-kubeconfig");
    let said = run(
        &[
            "queues",
            "--kubeconfig",
            &missing.display().to_string(),
            "--certificate-authority",
            &ca,
        ],
        vec![],
    )
    .await;
    assert!(!said.ok);
    clean(&said);
    assert!(
        said.stderr.starts_with(&format!(
            "error: the token for {server} from the kubeconfig: "
        )) && said.stderr.contains("no-such-kubeconfig"),
        "{}",
        said.stderr
    );
    // A context whose user has no token: not authenticated.
    let said = run(
        &[
            "jobs",
            "--kubeconfig",
            &kc,
            "--context",
            "nobody",
            "--certificate-authority",
            &ca,
        ],
        vec![],
    )
    .await;
    assert!(!said.ok);
    clean(&said);
    assert!(
        said.stderr.starts_with("error: not authenticated: "),
        "{}",
        said.stderr
    );

    tokio::time::timeout(std::time::Duration::from_secs(20), secure.running.stop())
        .await
        .expect("stops");
}
