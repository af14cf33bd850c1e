use super::*;

const SAMPLE: &str = include_str!("../../tests/data/openb-sample.csv");
const BAD: &str = include_str!("../../tests/data/openb-bad.csv");
const NODES: &str = include_str!("../../tests/data/openb-nodes-sample.csv");

/// Data lines of a CSV text split naively (the sample has no quoting).
fn data_rows(text: &str) -> Vec<Vec<&str>> {
    text.lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split(',').collect())
        .collect()
}

fn job<'a>(import: &'a Import, id: &str) -> &'a SimJob {
    import
        .jobs
        .iter()
        .find(|j| j.id == id)
        .unwrap_or_else(|| panic!("job {id} not imported"))
}

fn affinity_values(j: &SimJob) -> Vec<&str> {
    let c = &j.tasks[0].constraints;
    assert_eq!(c.required_affinity.len(), 1);
    let term = &c.required_affinity[0];
    assert!(term.match_fields.is_empty());
    assert_eq!(term.match_expressions.len(), 1);
    let r = &term.match_expressions[0];
    assert_eq!(r.key, "nvidia.com/gpu.product");
    assert_eq!(r.operator, LabelSelectorOperator::In);
    r.values.iter().map(String::as_str).collect()
}

#[test]
fn sample_counts_match_an_independent_count() {
    let rows = data_rows(SAMPLE);
    let pending = rows.iter().filter(|r| r[10].is_empty()).count() as u64;
    let import = parse_pods(SAMPLE, "openb-sample.csv", &ImportOptions::default()).unwrap();
    let r = &import.report;
    assert_eq!(r.rows, rows.len() as u64);
    assert_eq!(r.rows, 47);
    assert_eq!(pending, 4);
    assert_eq!(
        r.skipped,
        BTreeMap::from([(SKIP_NOT_SCHEDULED.to_string(), pending)])
    );
    assert_eq!(r.imported, r.rows - pending);
    assert_eq!(import.jobs.len() as u64, r.imported);
    assert_eq!(r.first_line[SKIP_NOT_SCHEDULED], 18, "openb-pod-0061");
    // The sample covers every qos, CPU-only, sharing and multi-GPU pods.
    for qos in ["LS", "BE", "Burstable", "Guaranteed"] {
        assert!(
            rows.iter().any(|r| r[6] == qos && !r[10].is_empty()),
            "{qos}"
        );
    }
    for num_gpu in ["0", "1", "2", "4", "8"] {
        assert!(rows.iter().any(|r| r[3] == num_gpu), "{num_gpu}");
    }
    // Totals over imported rows, computed from the text.
    let want_gpu: u64 = rows
        .iter()
        .filter(|r| !r[10].is_empty())
        .map(|r| {
            let n: u64 = r[3].parse().unwrap();
            let m: u64 = r[4].parse().unwrap();
            if n == 0 {
                0
            } else if m == 1000 {
                n * 1000
            } else {
                m
            }
        })
        .sum();
    let got_gpu: u64 = import.jobs.iter().map(SimJob::gpu_milli).sum();
    assert_eq!(got_gpu, want_gpu);
    // Sorted by (submit, id); ids unique.
    assert!(
        import
            .jobs
            .windows(2)
            .all(|w| (w[0].submit, &w[0].id) < (w[1].submit, &w[1].id))
    );
    let text = r.to_string();
    assert_eq!(
        text,
        "47 rows: 43 imported, 4 skipped\n        4  never scheduled (scheduled_time empty) (first at line 18)"
    );
}

#[test]
fn sample_field_conversions() {
    let import = parse_pods(SAMPLE, "openb-sample.csv", &ImportOptions::default()).unwrap();
    // openb-pod-0001,6000,12288,1,460,,LS,Running,427061,12902960,427061
    // (GPU sharing, still running at the end of the trace: kept).
    let j = job(&import, "openb-pod-0001");
    assert_eq!(j.queue, "default");
    assert_eq!(j.priority, 1000);
    assert_eq!(j.submit, Timestamp(427_061_000));
    assert_eq!(j.duration_ms, (12_902_960 - 427_061) * 1000);
    assert_eq!(j.min_member, 1);
    assert!(j.subgroups.is_empty());
    assert_eq!(j.tasks.len(), 1);
    let t = &j.tasks[0];
    assert_eq!(t.count, 1);
    assert_eq!(t.subgroup, None);
    assert_eq!(t.requests, Resources::new(6000, 12288 << 20, 460));
    assert_eq!(*t.constraints, PlacementConstraints::default());

    // openb-pod-0017,88000,327680,8,1000,,Burstable,Succeeded,9437497,10769854,9437497
    let j = job(&import, "openb-pod-0017");
    assert_eq!(j.priority, 500);
    assert_eq!(
        j.tasks[0].requests,
        Resources::new(88000, 327_680 << 20, 8000)
    );
    assert_eq!(j.duration_ms, (10_769_854 - 9_437_497) * 1000);

    // openb-pod-0048,8000,30517,0,0,,BE,Running,9992086,10013821,9992086 (CPU only)
    let j = job(&import, "openb-pod-0048");
    assert_eq!(j.priority, 100);
    assert_eq!(j.tasks[0].requests, Resources::new(8000, 30517 << 20, 0));
    assert_eq!(j.gpu_milli(), 0);

    // openb-pod-0129,...,Guaranteed,... ; openb-pod-0012 scheduled 7338 s
    // after creation: submit is creation, duration runs from scheduling.
    assert_eq!(job(&import, "openb-pod-0129").priority, 800);
    let j = job(&import, "openb-pod-0012");
    assert_eq!(j.submit, Timestamp(6_588_193_000));
    assert_eq!(j.duration_ms, (10_959_245 - 6_595_531) * 1000);

    // gpu_spec → required affinity, sorted and deduplicated.
    assert_eq!(
        affinity_values(job(&import, "openb-pod-0021")),
        ["G2", "P100", "T4", "V100M16", "V100M32"]
    );
    assert_eq!(
        affinity_values(job(&import, "openb-pod-1444")),
        ["A10", "G2", "P100", "T4", "V100M16", "V100M32"]
    );
    assert_eq!(
        affinity_values(job(&import, "openb-pod-0449")),
        ["A10", "T4"]
    );
    assert_eq!(affinity_values(job(&import, "openb-pod-0012")), ["T4"]);
    // One Arc per distinct model set, one for all unconstrained jobs.
    assert!(Arc::ptr_eq(
        &job(&import, "openb-pod-0012").tasks[0].constraints,
        &job(&import, "openb-pod-0022").tasks[0].constraints
    ));
    assert!(Arc::ptr_eq(
        &job(&import, "openb-pod-0001").tasks[0].constraints,
        &job(&import, "openb-pod-0048").tasks[0].constraints
    ));
    assert!(!Arc::ptr_eq(
        &job(&import, "openb-pod-0012").tasks[0].constraints,
        &job(&import, "openb-pod-0013").tasks[0].constraints
    ));
    // The affinity matches nodes of the trace's node list.
    let nodes = parse_nodes(NODES, "nodes").unwrap();
    let c = &job(&import, "openb-pod-0012").tasks[0].constraints;
    let matching: Vec<&str> = nodes
        .iter()
        .filter(|n| c.affinity_matches(n))
        .map(|n| n.name.as_str())
        .collect();
    assert_eq!(matching, ["openb-node-0035", "openb-node-0036"]);
}

#[test]
fn bad_rows_are_counted_by_reason() {
    let import = parse_pods(BAD, "openb-bad.csv", &ImportOptions::default()).unwrap();
    let r = &import.report;
    let expected: BTreeMap<String, u64> = [
        ("malformed row: wrong column count (expected 11)", 2),
        ("malformed row: cpu_milli is not a non-negative integer", 1),
        ("malformed row: memory_mib is not a non-negative integer", 1),
        ("malformed row: empty name", 1),
        ("malformed row: creation_time is not an integer", 1),
        ("malformed row: empty qos", 1),
        ("malformed row: empty model in gpu_spec", 1),
        (SKIP_GPU_MILLI_RANGE, 2),
        (SKIP_MULTI_FRACTIONAL, 1),
        (SKIP_GPU_WITHOUT_NUM, 1),
        (SKIP_NOT_SCHEDULED, 1),
        (SKIP_NO_CREATION, 1),
        (SKIP_NO_DELETION, 1),
        (SKIP_NEGATIVE_DURATION, 1),
        (SKIP_ZERO_DURATION, 1),
        (SKIP_DUPLICATE, 1),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    assert_eq!(r.skipped, expected);
    assert_eq!(r.rows, data_rows(BAD).len() as u64);
    assert_eq!(r.rows, 20);
    assert_eq!(r.imported, 2);
    assert_eq!(r.imported + r.skipped_total(), r.rows);
    assert_eq!(r.first_line[SKIP_DUPLICATE], 20);
    assert_eq!(
        r.first_line["malformed row: wrong column count (expected 11)"],
        3
    );
    // Sorted by submit: bad-ok-2 (50 s) before bad-ok-1 (100 s); the
    // first bad-ok-1 row wins over its duplicate.
    let ids: Vec<&str> = import.jobs.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(ids, ["bad-ok-2", "bad-ok-1"]);
    assert_eq!(import.jobs[1].duration_ms, 50_000);
    assert_eq!(import.jobs[1].tasks[0].requests.gpu, 220);
}

#[test]
fn multigpu_files_count_every_row_as_missing_times() {
    let text = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n\
                p0,12000,16384,1,1000\n\
                p1,6000,12288,1,460\n\
                p2,6000,12288,8,1000\n\
                p3,6000,12288\n";
    let import = parse_pods(text, "multigpu20.csv", &ImportOptions::default()).unwrap();
    assert!(import.jobs.is_empty());
    assert_eq!(import.report.rows, 4);
    assert_eq!(
        import.report.skipped,
        BTreeMap::from([
            (SKIP_NO_TIME_COLUMNS.to_string(), 3),
            (
                "malformed row: wrong column count (expected 5)".to_string(),
                1
            ),
        ])
    );
}

/// A time-less list replayed with the sample's times: a pod the sample
/// has takes its row; one it has but never ran is skipped so; an extra
/// pod borrows a same-sized row's spec, qos and run time and some row's
/// arrival, the same on every run; arrivals sped up divide.
#[test]
fn a_multigpu_list_borrows_the_times_of_a_full_list() {
    let times = TraceTimes::parse(SAMPLE, "openb-sample.csv").unwrap();
    let rows = data_rows(SAMPLE);
    let never = rows
        .iter()
        .find(|r| r[10].is_empty())
        .expect("a pending row")[0];
    let text = format!(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n\
         openb-pod-0017,88000,327680,8,1000\n\
         {never},1000,1024,1,1000\n\
         extra-8,88000,327680,8,1000\n\
         extra-3,1000,1024,3,1000\n"
    );
    let in_time = InTime {
        times: Some(times.clone()),
        arrival_speedup: 1,
    };
    let import = parse_pods_in_time(&text, "mg.csv", &ImportOptions::default(), &in_time).unwrap();
    assert_eq!(import.report.imported, 2);
    assert_eq!(
        import.report.skipped,
        BTreeMap::from([
            (SKIP_NOT_SCHEDULED.to_string(), 1),
            (SKIP_NO_TIME_SOURCE.to_string(), 1),
        ])
    );
    // By name: the sample's own row (Burstable, 9437497 s, ran 1332357 s).
    let own = job(&import, "openb-pod-0017");
    assert_eq!(own.submit, Timestamp(9_437_497_000));
    assert_eq!(own.duration_ms, 1_332_357_000);
    assert_eq!(own.priority, 500);
    // The extra 8-GPU pod: run time of an 8-GPU row of the sample, arrival
    // of some row of it.
    let extra = job(&import, "extra-8");
    let eight: Vec<u64> = rows
        .iter()
        .filter(|r| r[3] == "8" && !r[10].is_empty())
        .map(|r| (r[9].parse::<u64>().unwrap() - r[10].parse::<u64>().unwrap()) * 1000)
        .collect();
    assert!(eight.contains(&extra.duration_ms), "{}", extra.duration_ms);
    assert!(
        rows.iter()
            .any(|r| r[8].parse::<i64>().ok() == Some(extra.submit.0 / 1000))
    );
    // The same again, and sped up 10×.
    let again = parse_pods_in_time(&text, "mg.csv", &ImportOptions::default(), &in_time).unwrap();
    assert_eq!(again, import);
    let fast = InTime {
        times: Some(times),
        arrival_speedup: 10,
    };
    let sped = parse_pods_in_time(&text, "mg.csv", &ImportOptions::default(), &fast).unwrap();
    let f = job(&sped, "openb-pod-0017");
    assert_eq!(
        (f.submit, f.duration_ms),
        (Timestamp(943_749_700), own.duration_ms)
    );
    // A time source must have times; a speed-up of 0 is refused.
    let err = TraceTimes::parse(&text, "mg.csv").unwrap_err().to_string();
    assert!(err.contains("mg.csv") && err.contains("default"), "{err}");
    let zero = InTime {
        times: None,
        arrival_speedup: 0,
    };
    let err = parse_pods_in_time(SAMPLE, "s.csv", &ImportOptions::default(), &zero)
        .unwrap_err()
        .to_string();
    assert!(err.contains("speed-up must be 1 or more"), "{err}");
}

#[test]
fn limit_blank_lines_crlf_and_bom() {
    let opts = ImportOptions {
        limit_rows: Some(5),
        ..ImportOptions::default()
    };
    let import = parse_pods(SAMPLE, "s", &opts).unwrap();
    assert_eq!(import.report.rows, 5);
    assert_eq!(import.report.imported, 5);
    let zero = ImportOptions {
        limit_rows: Some(0),
        ..ImportOptions::default()
    };
    assert_eq!(parse_pods(SAMPLE, "s", &zero).unwrap().report.rows, 0);

    let crlf = format!("\u{feff}{}", SAMPLE.replace('\n', "\r\n\r\n"));
    let a = parse_pods(&crlf, "s", &ImportOptions::default()).unwrap();
    let b = parse_pods(SAMPLE, "s", &ImportOptions::default()).unwrap();
    assert_eq!(a.jobs, b.jobs);
    assert_eq!(a.report.rows, b.report.rows);
}

#[test]
fn pod_file_errors() {
    let o = ImportOptions::default();
    assert_eq!(
        parse_pods("", "p.csv", &o).unwrap_err().to_string(),
        "p.csv: empty input; expected the header line `name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time`"
    );
    assert_eq!(
        parse_pods("sn,cpu_milli,memory_mib,gpu,model\n", "p.csv", &o)
            .unwrap_err()
            .to_string(),
        "p.csv:1: header is `sn,cpu_milli,memory_mib,gpu,model`; expected `name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time` or (multigpu files) `name,cpu_milli,memory_mib,num_gpu,gpu_milli`"
    );
    // A qos the queue rule does not map.
    let by_qos = ImportOptions {
        queue_rule: "qos:LS=prod".parse().unwrap(),
        ..ImportOptions::default()
    };
    assert_eq!(
        parse_pods(SAMPLE, "s.csv", &by_qos).unwrap_err(),
        OpenbError::UnmappedQos {
            input: "s.csv".into(),
            line: 7,
            qos: "Burstable".into(),
            what: "queue".into(),
            mapping: "qos:LS=prod".into(),
        }
    );
    assert_eq!(
        parse_pods(SAMPLE, "s.csv", &by_qos)
            .unwrap_err()
            .to_string(),
        "s.csv:7: qos `Burstable` is not in the queue mapping `qos:LS=prod`, which has no `default` entry; add `Burstable=<queue>` or `default=<queue>` to it (--queue-rule qos:<qos>=<queue>,...)"
    );
    let no_prio = ImportOptions {
        priority_by_qos: BTreeMap::from([("LS".to_string(), 1)]),
        ..ImportOptions::default()
    };
    assert!(matches!(
        parse_pods(SAMPLE, "s.csv", &no_prio),
        Err(OpenbError::UnmappedQos { ref what, line: 7, .. }) if what == "priority"
    ));
    assert_eq!(
        parse_pods(SAMPLE, "s.csv", &no_prio)
            .unwrap_err()
            .to_string(),
        "s.csv:7: qos `Burstable` is not in the priority mapping `LS=1`, which has no `default` entry; add `Burstable=<priority>` or `default=<priority>` to it (--qos-priority <qos>=<priority>,...)"
    );
    let empty_hash = ImportOptions {
        queue_rule: QueueRule::Hash { queues: vec![] },
        ..ImportOptions::default()
    };
    assert_eq!(
        parse_pods(SAMPLE, "s.csv", &empty_hash)
            .unwrap_err()
            .to_string(),
        "s.csv: invalid import options: the hash queue rule lists no queues"
    );
    // Unterminated quote: a CSV error, not a panic.
    assert!(parse_pods("\"name", "q", &o).is_err());
}

#[test]
fn queue_rules_assign_queues_and_priorities() {
    let opts = ImportOptions {
        queue_rule: "qos:LS=prod,Guaranteed=prod,Burstable=research,default=dev"
            .parse()
            .unwrap(),
        priority_by_qos: BTreeMap::from([("LS".to_string(), 7), ("default".to_string(), -1)]),
        limit_rows: None,
    };
    let import = parse_pods(SAMPLE, "s", &opts).unwrap();
    for j in &import.jobs {
        let row = SAMPLE
            .lines()
            .find(|l| l.starts_with(&format!("{},", j.id)))
            .unwrap();
        let qos = row.split(',').nth(6).unwrap();
        let (queue, prio) = match qos {
            "LS" => ("prod", 7),
            "Guaranteed" => ("prod", -1),
            "Burstable" => ("research", -1),
            _ => ("dev", -1),
        };
        assert_eq!((j.queue.as_str(), j.priority), (queue, prio), "{}", j.id);
    }
    let hashed = ImportOptions {
        queue_rule: "hash:team-a,team-b,team-c".parse().unwrap(),
        ..ImportOptions::default()
    };
    let import = parse_pods(SAMPLE, "s", &hashed).unwrap();
    let q = |id: &str| job(&import, id).queue.clone();
    assert_eq!(q("openb-pod-0000"), "team-c");
    assert_eq!(q("openb-pod-0001"), "team-a");
}

#[test]
fn fnv_and_hash_rule_are_stable() {
    // Published FNV-1a 64 test vectors.
    assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
    assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
    assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    assert_eq!(fnv1a64(b"openb-pod-0000"), 0xdbe2_3dc8_fe81_855e);
    let rule: QueueRule = "hash:a,b,c".parse().unwrap();
    let got: Vec<&str> = (0..6)
        .map(|i| rule.queue_for(&format!("openb-pod-{i:04}"), "LS").unwrap())
        .collect();
    assert_eq!(got, ["c", "a", "a", "b", "a", "b"]);
    assert_eq!(rule.queue_for("", "LS"), Some("c"));
    assert_eq!(
        QueueRule::Hash { queues: vec![] }.queue_for("x", "LS"),
        None
    );
}

#[test]
fn crlf_files_report_the_lines_an_editor_shows() {
    let h = POD_COLUMNS.join(",");
    let ok = "p1,1000,1024,1,1000,,LS,Succeeded,0,100,10";
    let pending = "p2,1000,1024,1,1000,,LS,Pending,0,100,";
    let odd_qos = "p3,1000,1024,1,1000,,XX,Succeeded,0,100,10";
    let broken = "p4,1000";
    let opts = ImportOptions {
        queue_rule: "single:q".parse().unwrap(),
        ..ImportOptions::default()
    };
    // Lines: 1 header, 2 p1, 3 p2, 4 p4, 5 p3 (and with a blank line
    // after each: 1, 3, 5, 7, 9).
    for (nl, step) in [("\n", 1), ("\r\n", 1), ("\r\n\r\n", 2), ("\n\n", 2)] {
        let text = format!("\u{feff}{h}{nl}{ok}{nl}{pending}{nl}{broken}{nl}{odd_qos}{nl}");
        let line = |n: u64| 1 + (n - 1) * step;
        let e = parse_pods(&text, "p.csv", &opts).unwrap_err();
        assert!(
            matches!(e, OpenbError::UnmappedQos { line: l, .. } if l == line(5)),
            "{nl:?}: {e}"
        );
        let fine = text.replace(odd_qos, ok.replace("p1", "p5").as_str());
        let r = parse_pods(&fine, "p.csv", &opts).unwrap().report;
        assert_eq!(
            (
                r.first_line[SKIP_NOT_SCHEDULED],
                r.first_line["malformed row: wrong column count (expected 11)"]
            ),
            (line(3), line(4)),
            "{nl:?}"
        );
        let nodes = format!(
            "sn,cpu_milli,memory_mib,gpu,model{nl}n1,1000,100,1,V100M16{nl}n2,x,100,1,V100M16{nl}"
        );
        assert!(
            matches!(parse_nodes(&nodes, "n.csv"), Err(OpenbError::Field { line: l, .. }) if l == line(3)),
            "{nl:?}"
        );
    }
    // CSV syntax errors too.
    let text = format!("{h}\r\n{ok}\r\n\"p6,1\r\n");
    let r = parse_pods(&text, "p.csv", &opts).unwrap().report;
    assert_eq!(
        r.first_line.values().copied().collect::<Vec<_>>(),
        vec![3],
        "{r}"
    );
}

#[test]
fn priority_mapping_syntax() {
    let m = parse_priority_by_qos("LS=1000, BE=-5,default=0").unwrap();
    assert_eq!(format_priority_by_qos(&m), "BE=-5,LS=1000,default=0");
    assert_eq!(
        format_priority_by_qos(&default_priority_by_qos()),
        "BE=100,Burstable=500,Guaranteed=800,LS=1000"
    );
    assert_eq!(
        parse_priority_by_qos("LS").unwrap_err(),
        "entry `LS` is not `<qos>=<priority>`"
    );
    assert_eq!(
        parse_priority_by_qos("LS=high").unwrap_err(),
        "entry `LS=high`: expected a whole number from -2147483648 to 2147483647, found `high`"
    );
    assert_eq!(
        parse_priority_by_qos("LS=1,LS=2").unwrap_err(),
        "qos `LS` is mapped twice"
    );
}

#[test]
fn queue_rule_syntax() {
    let parse = |s: &str| s.parse::<QueueRule>();
    assert_eq!(parse("single:prod"), Ok(QueueRule::Single("prod".into())));
    assert_eq!(
        parse(" single: prod "),
        Ok(QueueRule::Single("prod".into()))
    );
    let qos = parse("qos:LS=prod,Guaranteed=prod,Burstable=research,BE=dev").unwrap();
    assert_eq!(
        qos,
        QueueRule::ByQos(BTreeMap::from([
            ("BE".to_string(), "dev".to_string()),
            ("Burstable".to_string(), "research".to_string()),
            ("Guaranteed".to_string(), "prod".to_string()),
            ("LS".to_string(), "prod".to_string()),
        ]))
    );
    assert_eq!(qos.queue_for("x", "BE"), Some("dev"));
    assert_eq!(qos.queue_for("x", "Other"), None);
    assert_eq!(
        qos.to_string(),
        "qos:BE=dev,Burstable=research,Guaranteed=prod,LS=prod"
    );
    let hash = parse("hash:team-a,team-b,team-c").unwrap();
    assert_eq!(
        hash,
        QueueRule::Hash {
            queues: vec!["team-a".into(), "team-b".into(), "team-c".into()]
        }
    );
    for rule in [&qos, &hash, &QueueRule::default()] {
        assert_eq!(parse(&rule.to_string()).as_ref(), Ok(rule));
    }
    assert_eq!(QueueRule::default().to_string(), "single:default");

    let err = |s: &str| parse(s).unwrap_err().problem;
    assert_eq!(err("prod"), "no `:` after the kind");
    assert_eq!(err("users:a"), "unknown kind `users`");
    assert_eq!(err("qos:LS"), "entry `LS` is not `<qos>=<queue>`");
    assert_eq!(err("qos:LS=a,LS=b"), "qos `LS` is mapped twice");
    assert_eq!(
        err("qos:=a"),
        "entry `=a`: the qos value must be non-empty without spaces"
    );
    assert!(err("single:").starts_with("queue name must not be empty"));
    assert!(err("hash:a,,b").starts_with("queue name must not be empty"));
    assert!(err("single:Prod").contains("not a valid DNS-1123 subdomain"));
    assert_eq!(
        parse("nope").unwrap_err().to_string(),
        "invalid queue rule `nope`: no `:` after the kind; expected `single:<queue>`, `qos:<qos>=<queue>,...` or `hash:<queue>,<queue>,...`"
    );
}

#[test]
fn nodes_sample() {
    let nodes = parse_nodes(NODES, "nodes.csv").unwrap();
    let rows = data_rows(NODES);
    assert_eq!(nodes.len(), rows.len());
    assert_eq!(nodes.len(), 12);
    for (n, r) in nodes.iter().zip(&rows) {
        assert_eq!(n.name, r[0]);
        let gpus: u64 = r[3].parse().unwrap();
        assert_eq!(n.allocatable.cpu, r[1].parse::<u64>().unwrap());
        assert_eq!(n.allocatable.memory, r[2].parse::<u64>().unwrap() << 20);
        assert_eq!(n.allocatable.gpu, gpus * 1000);
        assert_eq!(n.gpus.len() as u64, gpus);
        assert_eq!(n.max_pods, None);
        assert!(n.taints.is_empty() && !n.unschedulable);
        assert_eq!(
            n.labels,
            BTreeMap::from([("nvidia.com/gpu.product".to_string(), r[4].to_string())])
        );
        for (i, d) in n.gpus.iter().enumerate() {
            assert_eq!(d.index, i as u32);
            assert_eq!(d.model, r[4]);
        }
    }
    let mem = |name: &str| {
        nodes
            .iter()
            .find(|n| n.name == name)
            .map(|n| n.gpus[0].memory_bytes)
            .unwrap()
    };
    assert_eq!(mem("openb-node-0000"), 16 << 30, "P100");
    assert_eq!(mem("openb-node-0035"), 16 << 30, "T4");
    assert_eq!(mem("openb-node-0025"), 16 << 30, "V100M16");
    assert_eq!(mem("openb-node-0023"), 32 << 30, "V100M32");
    assert_eq!(mem("openb-node-1032"), 24 << 30, "A10");
    assert_eq!(mem("openb-node-0026"), 0, "G2");
    assert_eq!(mem("openb-node-0022"), 0, "G3");
    assert_eq!(gpu_memory_bytes("G1"), 0);

    // No GPUs: no devices, no label, model ignored.
    let n = parse_nodes(
        "sn,cpu_milli,memory_mib,gpu,model\ncpu-0,1000,1024,0,\n",
        "x",
    )
    .unwrap();
    assert_eq!(n[0].gpus.len(), 0);
    assert!(n[0].labels.is_empty());
    assert_eq!(n[0].allocatable, Resources::new(1000, 1 << 30, 0));
}

#[test]
fn node_errors_name_line_column_and_expectation() {
    const H: &str = "sn,cpu_milli,memory_mib,gpu,model\n";
    let e = |body: &str| {
        parse_nodes(&format!("{H}{body}"), "nodes.csv")
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        e("n0,1000,1024,1,T4\nn1,lots,1024,1,T4\n"),
        "nodes.csv:3: column `cpu_milli`: expected a non-negative integer (millicores), found `lots`"
    );
    assert_eq!(
        e("n0,1000,-5,1,T4\n"),
        "nodes.csv:2: column `memory_mib`: expected a non-negative integer (MiB) below 2^44, found `-5`"
    );
    assert_eq!(
        e("n0,1000,1024,4000000000,T4\n"),
        "nodes.csv:2: column `gpu`: expected a GPU count, an integer from 0 to 1024, found `4000000000`"
    );
    assert_eq!(
        e("n0,1000,1024,2,\n"),
        "nodes.csv:2: column `model`: expected a GPU model (T4, P100, V100M16, V100M32, A10, G1, G2, G3, ...) on a node with GPUs, found ``"
    );
    assert_eq!(
        e(",1000,1024,2,T4\n"),
        "nodes.csv:2: column `sn`: expected a node name, found ``"
    );
    assert_eq!(
        e("n0,1000,1024,2\n"),
        "nodes.csv:2: 4 columns; expected 5 (sn,cpu_milli,memory_mib,gpu,model)"
    );
    assert_eq!(
        e("n0,1000,1024,2,T4\nn0,1000,1024,2,T4\n"),
        "nodes.csv:3: duplicate node `n0` (first on line 2)"
    );
    assert_eq!(
        parse_nodes("sn,cpu,memory_mib,gpu,model\n", "nodes.csv")
            .unwrap_err()
            .to_string(),
        "nodes.csv:1: header is `sn,cpu,memory_mib,gpu,model`; expected `sn,cpu_milli,memory_mib,gpu,model`"
    );
    assert_eq!(
        parse_nodes("", "nodes.csv").unwrap_err().to_string(),
        "nodes.csv: empty input; expected the header line `sn,cpu_milli,memory_mib,gpu,model`"
    );
}

proptest::proptest! {
    #[test]
    fn never_panics_on_arbitrary_text(body in "[a-zA-Z0-9,|\"\\-\\n\\r. ]{0,400}") {
        let pods = format!("{}\n{body}", POD_COLUMNS.join(","));
        let _ = parse_pods(&pods, "p", &ImportOptions::default());
        let _ = parse_pods(&body, "p", &ImportOptions::default());
        let nodes = format!("{}\n{body}", NODE_COLUMNS.join(","));
        let _ = parse_nodes(&nodes, "n");
        let _ = body.parse::<QueueRule>();
    }

    #[test]
    fn report_accounts_for_every_row(
        lines in proptest::collection::vec(
            "[a-c]{1,2},[0-9]{1,3},[0-9]{1,3},[0-2],(0|500|1000|1500),(|T4|T4\\|G2),(LS|BE),Running,[0-9]{0,2},[0-9]{0,2},[0-9]{0,2}",
            0..40,
        )
    ) {
        let text = format!("{}\n{}", POD_COLUMNS.join(","), lines.join("\n"));
        let import = parse_pods(&text, "p", &ImportOptions::default()).unwrap();
        let r = &import.report;
        proptest::prop_assert_eq!(r.rows, lines.len() as u64);
        proptest::prop_assert_eq!(r.imported + r.skipped_total(), r.rows);
        proptest::prop_assert_eq!(import.jobs.len() as u64, r.imported);
    }
}
