//! contrib/: the Grafana dashboard queries only metrics the exporter serves and shows every
//! result it exports; the systemd units start subcommands with flags the binary has, hardened;
//! the sample agent config is in the contract's format; the Prometheus config passes promtool;
//! and a real Prometheus (Debian's package) runs here, scraping itself and accepting every
//! query of the dashboard.

// Helpers outside #[test] fns fail their test by panicking, as the tests do (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use serde_json::Value;

use common::need::{require, unavailable, Need, PROMTOOL};
use common::prometheus::{Prometheus, Scrape, ITSELF};
use wirebench::metrics::METRIC_NAMES;

fn contrib(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("contrib")
        .join(path)
}

fn read(path: &str) -> String {
    std::fs::read_to_string(contrib(path)).unwrap_or_else(|e| panic!("contrib/{path}: {e}"))
}

fn dashboard() -> Value {
    serde_json::from_str(&read("grafana/wirebench-dashboard.json"))
        .expect("the dashboard is one JSON document")
}

/// Every panel, those inside rows (collapsed rows hold theirs) included.
fn panels(dash: &Value) -> Vec<&Value> {
    fn walk<'a>(list: &'a Value, out: &mut Vec<&'a Value>) {
        for p in list.as_array().into_iter().flatten() {
            out.push(p);
            walk(&p["panels"], out);
        }
    }
    let mut out = Vec::new();
    walk(&dash["panels"], &mut out);
    out
}

fn is_row(panel: &Value) -> bool {
    panel["type"] == "row"
}

/// Every PromQL expression of a panel's queries.
fn exprs(panel: &Value) -> Vec<String> {
    panel["targets"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["expr"].as_str().map(str::to_owned))
        .collect()
}

/// The templating variables' queries (Grafana's query editor keeps the text in `query.query`,
/// older dashboards in `query` itself), by variable name.
fn variable_queries(dash: &Value) -> Vec<(String, String)> {
    dash["templating"]["list"]
        .as_array()
        .expect("templating.list")
        .iter()
        .filter(|v| v["type"] == "query")
        .map(|v| {
            let q = v["query"]["query"]
                .as_str()
                .or_else(|| v["query"].as_str())
                .unwrap_or_else(|| panic!("variable {} has no query", v["name"]));
            (v["name"].as_str().unwrap_or("?").to_owned(), q.to_owned())
        })
        .collect()
}

/// The PromQL expression inside a Grafana variable query: `label_values(EXPR, label)` gives
/// EXPR (its last argument is a label name, not a metric), `label_values(label)` gives none,
/// `query_result(EXPR)` gives EXPR. Anything else is not a form this test reads.
fn variable_expr(query: &str) -> Option<String> {
    let q = query.trim();
    let inner = |prefix: &str| {
        q.strip_prefix(prefix)
            .and_then(|r| r.strip_suffix(')'))
            .map(str::trim)
    };
    if let Some(args) = inner("label_values(") {
        // The last comma outside braces and parentheses separates EXPR from the label.
        let mut depth = 0i32;
        let mut in_string = false;
        let mut split = None;
        for (i, c) in args.char_indices() {
            match c {
                '"' => in_string = !in_string,
                '{' | '(' | '[' if !in_string => depth += 1,
                '}' | ')' | ']' if !in_string => depth -= 1,
                ',' if !in_string && depth == 0 => split = Some(i),
                _ => {}
            }
        }
        return match split {
            Some(i) => {
                let label = args[i + 1..].trim();
                assert!(
                    label.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
                    "{query}: {label:?} is not a label name"
                );
                Some(args[..i].trim().to_owned())
            }
            None => None,
        };
    }
    if let Some(expr) = inner("query_result(") {
        return Some(expr.to_owned());
    }
    panic!("{query}: not a variable query this test reads (label_values or query_result)");
}

/// PromQL's keywords and aggregation operators: identifiers that are neither metrics nor,
/// when no parenthesis follows, functions.
const PROMQL_WORDS: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "bool",
    "offset",
    "and",
    "or",
    "unless",
    "atan2",
    "inf",
    "nan",
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
    "start",
    "end",
];

/// Clauses whose parenthesised list holds label names.
const LABEL_LISTS: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

/// The metric names a PromQL expression reads: what is left once string literals (label
/// values, which may look like metric names), Grafana variables, label matchers `{...}`, ranges
/// `[...]`, label lists of by/without/on/ignoring/group_left/group_right, numbers and
/// durations, function names (an identifier before `(`) and PromQL's words are taken out.
fn metric_names(expr: &str) -> Vec<String> {
    assert!(
        !expr.contains("__name__"),
        "{expr}: selects metrics by __name__, which hides their names from this check"
    );
    let chars: Vec<char> = expr.chars().collect();
    // Pass 1: blank strings, variables, {...} and [...].
    let mut plain = String::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '"' | '\'' | '`' => {
                i += 1;
                while i < chars.len() && chars[i] != c {
                    if chars[i] == '\\' && c != '`' {
                        i += 1;
                    }
                    i += 1;
                }
                plain.push(' ');
            }
            '$' => {
                i += 1;
                if chars.get(i) == Some(&'{') {
                    while i < chars.len() && chars[i] != '}' {
                        i += 1;
                    }
                } else {
                    while i + 1 < chars.len()
                        && (chars[i + 1].is_ascii_alphanumeric() || chars[i + 1] == '_')
                    {
                        i += 1;
                    }
                }
                plain.push(' ');
            }
            '{' | '[' => {
                let close = if c == '{' { '}' } else { ']' };
                while i < chars.len() && chars[i] != close {
                    // A string inside a matcher may hold the closing character.
                    if chars[i] == '"' || chars[i] == '\'' {
                        let q = chars[i];
                        i += 1;
                        while i < chars.len() && chars[i] != q {
                            if chars[i] == '\\' {
                                i += 1;
                            }
                            i += 1;
                        }
                    }
                    i += 1;
                }
                plain.push(' ');
            }
            _ => plain.push(c),
        }
        i += 1;
    }
    // Pass 2: tokens.
    #[derive(Debug, PartialEq)]
    enum Tok {
        Ident(String),
        Open,
        Close,
        Other,
    }
    let p: Vec<char> = plain.chars().collect();
    let mut toks = Vec::new();
    let mut i = 0;
    while i < p.len() {
        let c = p[i];
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() || (c == '.' && p.get(i + 1).is_some_and(char::is_ascii_digit))
        {
            // A number or a duration (5m, 1e3, 0x1f, 1h30m).
            while i < p.len() && (p[i].is_ascii_alphanumeric() || p[i] == '.') {
                i += 1;
            }
            toks.push(Tok::Other);
        } else if c.is_ascii_alphabetic() || c == '_' || c == ':' {
            let start = i;
            while i < p.len() && (p[i].is_ascii_alphanumeric() || p[i] == '_' || p[i] == ':') {
                i += 1;
            }
            toks.push(Tok::Ident(p[start..i].iter().collect()));
        } else {
            toks.push(match c {
                '(' => Tok::Open,
                ')' => Tok::Close,
                _ => Tok::Other,
            });
            i += 1;
        }
    }
    let mut names = Vec::new();
    let mut k = 0;
    while k < toks.len() {
        if let Tok::Ident(word) = &toks[k] {
            let next_open = toks.get(k + 1) == Some(&Tok::Open);
            if LABEL_LISTS.contains(&word.as_str()) && next_open {
                // Skip the label list to its closing parenthesis.
                while k < toks.len() && toks[k] != Tok::Close {
                    k += 1;
                }
            } else if !next_open && !PROMQL_WORDS.contains(&word.as_str()) {
                names.push(word.clone());
            }
        }
        k += 1;
    }
    names
}

/// Every (where, expression) of the dashboard: panel queries and variable queries.
fn all_exprs(dash: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for p in panels(dash) {
        for e in exprs(p) {
            out.push((format!("panel {:?}", p["title"]), e));
        }
    }
    for (name, q) in variable_queries(dash) {
        if let Some(e) = variable_expr(&q) {
            out.push((format!("variable ${name}"), e));
        }
    }
    out
}

#[test]
fn promql_metric_names_are_told_from_functions_labels_and_values() {
    let cases: &[(&str, &[&str])] = &[
        (
            r#"sum by (instance, kind) (rate(wirebench_server_refusals_total{kind="wirebench_fake", job=~"a|b"}[5m]))"#,
            &["wirebench_server_refusals_total"],
        ),
        (
            r#"time() - wirebench_last_run_timestamp_seconds{target=~"$target", test='x}y'} offset 5m"#,
            &["wirebench_last_run_timestamp_seconds"],
        ),
        (
            "wirebench_a / on (wirebench_label) group_left (other) wirebench_b > bool 1e3",
            &["wirebench_a", "wirebench_b"],
        ),
        (
            "histogram_quantile(0.99, sum without (le) (rate(x_bucket[$__rate_interval])))",
            &["x_bucket"],
        ),
        (
            "increase(wirebench_regressions_total{target=~\"${target}\"}[1h]) and up",
            &["wirebench_regressions_total", "up"],
        ),
        ("topk(3, wirebench_loss_ratio)", &["wirebench_loss_ratio"]),
    ];
    for (expr, want) in cases {
        assert_eq!(metric_names(expr), *want, "{expr}");
    }
    assert_eq!(
        variable_expr(r#"label_values(wirebench_test_info{target=~"$target", x="a,b"}, test)"#)
            .as_deref(),
        Some(r#"wirebench_test_info{target=~"$target", x="a,b"}"#)
    );
    assert_eq!(variable_expr("label_values(target)"), None);
}

#[test]
fn dashboard_queries_only_metrics_the_exporter_serves() {
    let dash = dashboard();
    let known: BTreeSet<&str> = METRIC_NAMES.iter().copied().collect();
    let all = all_exprs(&dash);
    assert!(all.len() >= 10, "only {} queries", all.len());
    for (place, expr) in &all {
        let names = metric_names(expr);
        assert!(!names.is_empty(), "{place}: {expr} reads no metric");
        for n in names {
            assert!(
                known.contains(n.as_str()),
                "{place}: {expr} reads {n}, which the exporter does not serve (METRIC_NAMES)"
            );
        }
    }
    // The variables come from the info metric, as the contract names it.
    let vars: BTreeMap<String, String> = variable_queries(&dash).into_iter().collect();
    for v in ["target", "test"] {
        let q = vars.get(v).unwrap_or_else(|| panic!("no ${v} variable"));
        assert!(
            q.starts_with("label_values(wirebench_test_info") && q.ends_with(&format!(", {v})")),
            "${v}: {q}"
        );
    }
}

#[test]
fn dashboard_panels_have_titles_queries_and_units() {
    let dash = dashboard();
    assert_eq!(dash["schemaVersion"], 39);
    let vars: BTreeSet<String> = dash["templating"]["list"]
        .as_array()
        .expect("templating.list")
        .iter()
        .filter_map(|v| v["name"].as_str().map(str::to_owned))
        .collect();
    assert!(vars.contains("datasource"), "no datasource variable");
    let mut ids = BTreeSet::new();
    for p in panels(&dash) {
        let title = p["title"].as_str().unwrap_or("");
        assert!(!title.trim().is_empty(), "a panel without a title: {p}");
        assert!(
            ids.insert(p["id"].as_u64().expect("a panel id")),
            "{title}: id used twice"
        );
        if let Some(var) = p["repeat"].as_str() {
            assert!(
                vars.contains(var),
                "{title}: repeats by ${var}, not a variable"
            );
        }
        if is_row(p) {
            continue;
        }
        let targets = p["targets"].as_array().map(Vec::len).unwrap_or(0);
        assert!(targets > 0, "{title}: no query");
        assert_eq!(exprs(p).len(), targets, "{title}: a query without expr");
        for t in p["targets"].as_array().into_iter().flatten() {
            assert_eq!(
                t["datasource"]["uid"], "${datasource}",
                "{title}: a query not on the dashboard's Prometheus"
            );
        }
        // Every figure says its unit.
        let unit = p["fieldConfig"]["defaults"]["unit"].as_str().unwrap_or("");
        assert!(!unit.is_empty(), "{title}: no unit");
    }
}

#[test]
fn dashboard_shows_every_result_gauge_with_its_unit() {
    let dash = dashboard();
    // Family -> the unit of the panels that show it (None: any).
    let want: &[(&str, Option<&str>)] = &[
        ("wirebench_latency_seconds", Some("s")),
        ("wirebench_throughput_bytes_per_second", Some("Bps")),
        ("wirebench_loss_ratio", Some("percentunit")),
        ("wirebench_responsiveness_rpm", None),
        ("wirebench_result_valid", None),
        ("wirebench_regressed", None),
        ("wirebench_regressions_total", None),
        ("wirebench_run_failures_total", None),
        ("wirebench_server_active_sessions", None),
        ("wirebench_server_refusals_total", None),
    ];
    for (family, unit) in want {
        assert!(METRIC_NAMES.contains(family), "{family} left METRIC_NAMES");
        let showing: Vec<&Value> = panels(&dash)
            .into_iter()
            .filter(|p| {
                exprs(p)
                    .iter()
                    .any(|e| metric_names(e).contains(&family.to_string()))
            })
            .collect();
        assert!(!showing.is_empty(), "no panel shows {family}");
        if let Some(unit) = unit {
            for p in showing {
                assert_eq!(
                    p["fieldConfig"]["defaults"]["unit"], *unit,
                    "{}: {family} in another unit",
                    p["title"]
                );
            }
        }
    }
    // The refusals are shown by kind, the latency per target and by quantile.
    let all: Vec<String> = all_exprs(&dash).into_iter().map(|(_, e)| e).collect();
    assert!(all
        .iter()
        .any(|e| e.contains("wirebench_server_refusals_total") && e.contains("kind")));
    let latency = panels(&dash)
        .into_iter()
        .find(|p| {
            exprs(p)
                .iter()
                .any(|e| e.contains("wirebench_latency_seconds"))
        })
        .expect("a latency panel");
    assert_eq!(
        latency["repeat"], "target",
        "the latency panel repeats per target"
    );
    assert!(latency["targets"][0]["legendFormat"]
        .as_str()
        .unwrap_or("")
        .contains("{{quantile}}"));
}

/// The ExecStart lines of a unit, commented-out alternatives (`#ExecStart=`) included: each
/// as (binary, subcommand, flags).
fn exec_starts(unit: &str) -> Vec<(String, String, Vec<String>)> {
    unit.lines()
        .filter_map(|l| l.trim().trim_start_matches('#').strip_prefix("ExecStart="))
        .map(|cmd| {
            let words: Vec<&str> = cmd.split_whitespace().collect();
            let flags = words
                .iter()
                .filter(|w| w.starts_with("--"))
                .map(|w| w.split('=').next().unwrap_or(w).to_owned())
                .collect();
            (words[0].to_owned(), words[1].to_owned(), flags)
        })
        .collect()
}

/// `wirebench SUBCOMMAND --help`, or None when the binary has no such subcommand.
fn help(subcommand: &str) -> Option<String> {
    let out = common::run(&[subcommand, "--help"]);
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

fn has_flag(help: &str, flag: &str) -> bool {
    help.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .any(|w| w == flag)
}

/// What every unit in contrib/systemd must hold: a user of its own, a read-only system, the
/// state directory as the results database's home, no capabilities, restarts on failure.
fn assert_hardened(name: &str, unit: &str) {
    let lines: BTreeSet<&str> = unit
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#'))
        .collect();
    for section in ["[Unit]", "[Service]", "[Install]"] {
        assert!(lines.contains(section), "{name}: no {section}");
    }
    for want in [
        "DynamicUser=yes",
        "ProtectSystem=strict",
        "StateDirectory=wirebench",
        "Environment=XDG_DATA_HOME=%S/wirebench",
        "Restart=on-failure",
        "AmbientCapabilities=",
        "CapabilityBoundingSet=",
        "NoNewPrivileges=yes",
        "WantedBy=multi-user.target",
    ] {
        assert!(lines.contains(want), "{name}: no {want}");
    }
    assert!(
        unit.contains("CAP_NET_RAW") && unit.contains("raw"),
        "{name}: says nothing of what needs CAP_NET_RAW"
    );
    for (bin, _, _) in &exec_starts(unit) {
        assert!(bin.ends_with("/wirebench"), "{name}: starts {bin}");
    }
}

/// Each flag of `starts` is one `wirebench <subcommand> --help` lists. `pending` are flags
/// another branch brings (the contract's): their absence is a skip, named, not a failure.
fn assert_flags_exist(name: &str, subcommand: &str, help: &str, pending: &[&str]) {
    let unit = read(name);
    let starts = exec_starts(&unit);
    assert!(!starts.is_empty(), "{name}: no ExecStart");
    let mut missing = BTreeSet::new();
    for (_, sub, flags) in starts {
        assert_eq!(sub, subcommand, "{name}");
        for flag in flags {
            if !has_flag(help, &flag) {
                assert!(
                    pending.contains(&flag.as_str()),
                    "{name}: `wirebench {subcommand}` has no {flag}"
                );
                missing.insert(flag);
            }
        }
    }
    for flag in missing {
        unavailable(
            &format!("{name} {flag}"),
            &format!("`wirebench {subcommand} {flag}` not built on this branch"),
        );
    }
}

#[test]
fn serve_unit_uses_flags_serve_has_and_is_hardened() {
    let name = "systemd/wirebench-serve.service";
    let unit = read(name);
    assert_hardened(name, &unit);
    let help = help("serve").expect("wirebench serve --help");
    assert_flags_exist(name, "serve", &help, &["--metrics"]);
}

#[test]
fn agent_unit_uses_flags_agent_has_and_is_hardened() {
    let name = "systemd/wirebench-agent.service";
    let unit = read(name);
    assert_hardened(name, &unit);
    let starts = exec_starts(&unit);
    assert_eq!(starts.len(), 1, "{name}: one ExecStart");
    assert_eq!(starts[0].1, "agent");
    assert!(starts[0].2.contains(&"--config".to_owned()));
    let Some(help) = help("agent") else {
        unavailable(name, "agent subcommand not built on this branch");
        return;
    };
    assert_flags_exist(name, "agent", &help, &[]);
}

/// The keys of `table` are among `allowed` (the contract's `deny_unknown_fields`).
fn assert_keys(what: &str, table: &toml::Table, allowed: &[&str]) {
    for k in table.keys() {
        assert!(allowed.contains(&k.as_str()), "{what}: unknown key {k}");
    }
}

fn duration(what: &str, v: &toml::Value) -> std::time::Duration {
    let text = v
        .as_str()
        .unwrap_or_else(|| panic!("{what}: a duration as text"));
    humantime::parse_duration(text).unwrap_or_else(|e| panic!("{what}: {text:?}: {e}"))
}

#[test]
fn sample_agent_config_is_in_the_contracts_format() {
    let text = read("agent-three-sites.toml");
    let doc: toml::Table = toml::from_str(&text).expect("contrib/agent-three-sites.toml is TOML");
    assert_keys(
        "top level",
        &doc,
        &["agent", "retention", "regression", "target", "test"],
    );
    let agent = doc["agent"].as_table().expect("[agent]");
    assert_keys(
        "[agent]",
        agent,
        &[
            "name",
            "metrics",
            "seed",
            "cpu_budget_percent",
            "traffic_budget_bytes_per_s",
        ],
    );
    let metrics = agent["metrics"].as_str().expect("metrics");
    metrics
        .parse::<std::net::SocketAddr>()
        .unwrap_or_else(|e| panic!("[agent] metrics = {metrics:?}: {e}"));
    let retention = doc["retention"].as_table().expect("[retention]");
    assert_keys("[retention]", retention, &["max_age", "max_runs"]);
    assert_eq!(
        duration("max_age", &retention["max_age"]),
        std::time::Duration::from_secs(30 * 86_400),
        "retention: 30 days"
    );
    let regression = doc["regression"].as_table().expect("[regression]");
    assert_keys(
        "[regression]",
        regression,
        &[
            "baseline_runs",
            "recent_runs",
            "threshold_percent",
            "confidence",
        ],
    );

    let targets = doc["target"].as_array().expect("[[target]]");
    let mut names = Vec::new();
    for t in targets {
        let t = t.as_table().expect("a [[target]] table");
        assert_keys("[[target]]", t, &["name", "address", "labels"]);
        let address = t["address"].as_str().expect("address");
        address
            .parse::<std::net::SocketAddr>()
            .unwrap_or_else(|e| panic!("target address {address:?}: {e}"));
        names.push(t["name"].as_str().expect("name").to_owned());
    }
    assert_eq!(
        names,
        ["site-b", "site-c"],
        "site a's agent measures b and c"
    );

    // name -> (period, slip, pattern, transport)
    let mut tests = BTreeMap::new();
    for t in doc["test"].as_array().expect("[[test]]") {
        let t = t.as_table().expect("a [[test]] table");
        assert_keys("[[test]]", t, &["name", "period", "slip", "targets", "run"]);
        let name = t["name"].as_str().expect("name").to_owned();
        for target in t
            .get("targets")
            .and_then(|v| v.as_array())
            .into_iter()
            .flatten()
        {
            let target = target.as_str().expect("a target name");
            assert!(
                names.iter().any(|n| n == target),
                "{name}: no target {target}"
            );
        }
        // The run table is a study file's [run]: the request type itself reads it.
        let run_text = toml::to_string(&t["run"]).expect("run re-serialised");
        let request: wirebench::request::Request = toml::from_str(&run_text)
            .unwrap_or_else(|e| panic!("{name}: [test.run] is not a run request: {e}"));
        let period = duration("period", &t["period"]);
        let slip = t.get("slip").map(|s| duration("slip", s));
        if let Some(slip) = slip {
            assert!(
                slip < period,
                "{name}: slip {slip:?} not under period {period:?}"
            );
        }
        let request_json = serde_json::to_value(&request).expect("request as JSON");
        tests.insert(name, (period, slip, request_json));
    }
    let secs = std::time::Duration::from_secs;
    let ping = &tests["ping64"];
    assert_eq!(ping.0, secs(10));
    assert_eq!(ping.2["pattern"], "pingpong");
    assert_eq!(ping.2["transport"], "tcp");
    assert_eq!(ping.2["sizes"]["size"], serde_json::json!([64]));
    let rr = &tests["udp-rr-1k"];
    assert_eq!(rr.0, secs(30));
    assert_eq!(rr.2["pattern"], "rr");
    assert_eq!(rr.2["transport"], "udp");
    assert_eq!(rr.2["sizes"]["request_size"], 1024);
    assert_eq!(rr.2["sizes"]["response_size"], 1024);
    let stream = &tests["stream-5s"];
    assert_eq!(stream.0, secs(15 * 60));
    assert_eq!(stream.1, Some(secs(5 * 60)));
    assert_eq!(stream.2["pattern"], "stream");
    assert_eq!(stream.2["transport"], "tcp");
    assert_eq!(stream.2["stop"]["duration"], "5s");
}

#[test]
fn prometheus_config_passes_promtool() {
    if !require(&[Need::Prometheus]) {
        return;
    }
    let out = std::process::Command::new(PROMTOOL)
        .args(["check", "config"])
        .arg(contrib("prometheus/prometheus.yml"))
        .output()
        .expect("promtool runs");
    assert!(
        out.status.success(),
        "promtool check config: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // The agents, the servers and a blackbox-style probe job.
    let text = read("prometheus/prometheus.yml");
    for want in [
        "job_name: wirebench-agent",
        "job_name: wirebench-serve",
        "metrics_path: /probe",
        "target_label: __param_target",
        "target_label: __address__",
    ] {
        assert!(text.contains(want), "prometheus.yml: no {want}");
    }
}

#[test]
fn prometheus_harness_scrapes_itself() {
    if !require(&[Need::Prometheus]) {
        return;
    }
    let prom = Prometheus::start(&[Scrape::new("self", &[ITSELF])]);
    let up = prom.wait_for(r#"up{job="self"} == 1"#, |r| r.len() == 1);
    assert_eq!(up[0].0["instance"], prom.addr.to_string());
    assert_eq!(up[0].1, 1.0);
    let build = prom.wait_for(r#"prometheus_build_info{job="self"}"#, |r| !r.is_empty());
    assert_eq!(build.len(), 1);
    assert!(build[0].0.contains_key("version"));
    // A bad expression is Prometheus's error, not an empty answer.
    let err = prom.query("sum(").expect_err("a parse error");
    assert!(err.contains("bad_data"), "{err}");
}

#[test]
fn prometheus_accepts_every_dashboard_query() {
    if !require(&[Need::Prometheus]) {
        return;
    }
    let prom = Prometheus::start(&[]);
    for (place, expr) in all_exprs(&dashboard()) {
        // Grafana's variables as "All" would expand them.
        let expr = expr
            .replace("${datasource}", "")
            .replace("$target", ".*")
            .replace("$test", ".*");
        if let Err(e) = prom.query(&expr) {
            panic!("{place}: Prometheus refuses {expr}: {e}");
        }
    }
}
