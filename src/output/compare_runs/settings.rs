//! The settings two runs differ in: a comparison across them compares settings, not a change.

use crate::model::RunDocument;

/// Settings that say how figures were summarised, not what was measured: a comparison across
/// them is still one measurement against another.
const STATISTICAL: [&str; 4] = ["confidence", "repeat", "until_ci", "max_repeat"];

/// Every leaf of a JSON value by its dotted path ("fast.zerocopy"), in key order.
fn leaves(
    prefix: &str,
    v: &serde_json::Value,
    out: &mut std::collections::BTreeMap<String, serde_json::Value>,
) {
    match v {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                let name = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                leaves(&name, v, out);
            }
        }
        other => {
            out.insert(prefix.to_owned(), other.clone());
        }
    }
}

/// What a run was measured with, as dotted paths: the transport, every setting of the run but
/// how its statistics were gathered, the one-port path and middlebox, and the lab link. Hosts,
/// addresses and times are left out: they are what a comparison is usually for.
fn measured_with(r: &RunDocument) -> std::collections::BTreeMap<String, serde_json::Value> {
    let mut settings = serde_json::to_value(&r.settings).unwrap_or_default();
    if let Some(map) = settings.as_object_mut() {
        map.retain(|k, _| !STATISTICAL.contains(&k.as_str()));
        map.insert("transport".into(), serde_json::json!(r.transport));
        map.insert(
            "server".into(),
            serde_json::json!({"one_port": r.server.one_port, "middlebox": r.server.middlebox}),
        );
        map.insert(
            "lab".into(),
            serde_json::to_value(r.lab.as_ref().map(|l| &l.config)).unwrap_or_default(),
        );
    }
    let mut out = std::collections::BTreeMap::new();
    leaves("", &settings, &mut out);
    out
}

/// The settings in which two runs differ, as "name: A -> B" (see [`measured_with`]).
pub fn setting_differences(a: &RunDocument, b: &RunDocument) -> Vec<String> {
    let (ma, mb) = (measured_with(a), measured_with(b));
    let null = serde_json::Value::Null;
    let mut names: Vec<&String> = ma.keys().chain(mb.keys()).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .filter_map(|name| {
            let (va, vb) = (ma.get(name).unwrap_or(&null), mb.get(name).unwrap_or(&null));
            (va != vb).then(|| format!("{name}: {va} -> {vb}"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use crate::output::compare_runs::{compare, format};
    use crate::stats::between_runs::DEFAULT_MARGIN_PERCENT as DEFAULT_MARGIN;
    use crate::store::db::tests::report;

    /// `--nodelay` against none is a different experiment, not a change: refused with the
    /// setting named, and compared only when asked, with the difference above the table.
    #[test]
    fn runs_with_different_settings_are_not_judged_unless_asked() {
        let a = report("pingpong", 2, 20_000.0);
        let mut b = report("pingpong", 2, 30_000.0);
        b.settings.nodelay = !a.settings.nodelay;
        b.settings.fast.zerocopy = true;
        b.settings.repeat = a.settings.repeat + 2; // how statistics were gathered: not a setting
        let e = compare(&a, &b, false, DEFAULT_MARGIN)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("nodelay: false -> true") && e.contains("fast.zerocopy: false -> true"),
            "{e}"
        );
        assert!(!e.contains("repeat"), "{e}");
        assert!(e.contains("--allow-different"), "{e}");
        let c = compare(&a, &b, true, DEFAULT_MARGIN).unwrap();
        assert_eq!(
            c.different_settings,
            vec!["fast.zerocopy: false -> true", "nodelay: false -> true"]
        );
        let text = format(&c, 1, 2, &a, &b);
        assert!(
            text.contains("# the runs differ in settings (--allow-different): fast.zerocopy"),
            "{text}"
        );
        // The same settings: nothing to allow.
        assert!(compare(&a, &a, false, DEFAULT_MARGIN)
            .unwrap()
            .different_settings
            .is_empty());
    }
}
