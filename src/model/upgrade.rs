//! Brings result documents of earlier schema versions to the current one, on the JSON before
//! it is parsed, so that the model (and everything rendered from it) only ever knows the
//! current names. Documents are stored and imported as they were written: this runs on every
//! read (see `results::db::parse_report`).

use serde_json::{Map, Value};

/// Version 1 to 2: every time in nanoseconds and every rate in bits per second. Measured
/// durations become integers (version 1 wrote them from whole nanoseconds with
/// `Duration::as_secs_f64`, whose error is far below half a nanosecond for any run's length,
/// so rounding gives back the nanoseconds measured); statistics (jitter, t0) stay floats.
/// A field that is absent or null stays so; one that is not a number is left for the parser
/// to refuse. The lab's `delay` and `jitter` (serde's `{"secs", "nanos"}`) are not renamed
/// here: lab state files hold the same type, so its own deserializer reads both forms (see
/// `units::duration_ns`).
pub fn v1_to_v2(mut doc: Value) -> Value {
    if let Some(root) = doc.as_object_mut() {
        root.insert("schema_version".into(), 2.into());
        if let Some(s) = object(root, "settings") {
            for name in ["duration", "interval", "io_timeout", "loss_timeout"] {
                seconds_to_whole_ns(s, name);
            }
        }
        for p in array(root, "points") {
            let Some(p) = p.as_object_mut() else { continue };
            if let Some(l) = object(p, "latency") {
                seconds_to_whole_ns(l, "elapsed");
            }
            if let Some(c) = object(p, "cpu") {
                for side in ["client", "server"] {
                    if let Some(t) = object(c, side) {
                        cpu_time(t);
                    }
                }
            }
            if let Some(st) = object(p, "stream") {
                for pair in array(st, "streams") {
                    let Some(pair) = pair.as_object_mut() else {
                        continue;
                    };
                    for side in ["sender", "receiver"] {
                        if let Some(s) = object(pair, side) {
                            stream_side(s);
                        }
                    }
                }
                for t in array(st, "totals") {
                    let Some(t) = t.as_object_mut() else { continue };
                    seconds_to_whole_ns(t, "sender_elapsed");
                    seconds_to_whole_ns(t, "receiver_elapsed");
                    if let Some(l) = object(t, "loss") {
                        seconds_to_ns(l, "jitter");
                    }
                }
            }
        }
        for g in array(root, "sweep_metrics") {
            if let Some(m) = g.as_object_mut().and_then(|g| object(g, "metrics")) {
                sweep_metrics(m);
            }
        }
    }
    doc
}

fn stream_side(s: &mut Map<String, Value>) {
    seconds_to_whole_ns(s, "elapsed");
    for iv in array(s, "intervals") {
        if let Some(iv) = iv.as_object_mut() {
            seconds_to_whole_ns(iv, "start");
            seconds_to_whole_ns(iv, "end");
        }
    }
    if let Some(l) = object(s, "loss") {
        seconds_to_ns(l, "jitter");
    }
    if let Some(c) = object(s, "cpu") {
        cpu_time(c);
    }
}

fn cpu_time(t: &mut Map<String, Value>) {
    seconds_to_whole_ns(t, "user");
    seconds_to_whole_ns(t, "system");
}

fn sweep_metrics(m: &mut Map<String, Value>) {
    seconds_to_ns(m, "t0");
    seconds_to_ns(m, "t0_ci");
    bytes_to_bits(m, "r_max");
    // (low, high): a pair of rates.
    rename(
        m,
        "r_max_ci_bytes_per_s",
        "r_max_ci_bits_per_s",
        |v| match v {
            Value::Array(pair) => Value::Array(pair.into_iter().map(|r| scale(r, 8.0)).collect()),
            other => other,
        },
    );
    if let Some(f) = object(m, "fit") {
        seconds_to_ns(f, "t0");
        bytes_to_bits(f, "r_inf");
    }
}

/// `<stem>_s` (seconds) to `<stem>_ns`, rounded to whole nanoseconds.
fn seconds_to_whole_ns(o: &mut Map<String, Value>, stem: &str) {
    rename(
        o,
        &format!("{stem}_s"),
        &format!("{stem}_ns"),
        |v| match v.as_f64() {
            Some(s) => Value::from((s * 1e9).round().max(0.0) as u64),
            None => v,
        },
    );
}

/// `<stem>_s` (seconds) to `<stem>_ns`, as a float.
fn seconds_to_ns(o: &mut Map<String, Value>, stem: &str) {
    rename(o, &format!("{stem}_s"), &format!("{stem}_ns"), |v| {
        scale(v, 1e9)
    });
}

/// `<stem>_bytes_per_s` to `<stem>_bits_per_s`: times 8, which is exact.
fn bytes_to_bits(o: &mut Map<String, Value>, stem: &str) {
    rename(
        o,
        &format!("{stem}_bytes_per_s"),
        &format!("{stem}_bits_per_s"),
        |v| scale(v, 8.0),
    );
}

fn scale(v: Value, by: f64) -> Value {
    match v.as_f64() {
        Some(x) => serde_json::Number::from_f64(x * by).map_or(Value::Null, Value::Number),
        None => v,
    }
}

fn rename(o: &mut Map<String, Value>, old: &str, new: &str, convert: impl Fn(Value) -> Value) {
    if let Some(v) = o.remove(old) {
        o.insert(new.to_owned(), convert(v));
    }
}

fn object<'a>(o: &'a mut Map<String, Value>, key: &str) -> Option<&'a mut Map<String, Value>> {
    o.get_mut(key).and_then(Value::as_object_mut)
}

fn array<'a>(o: &'a mut Map<String, Value>, key: &str) -> impl Iterator<Item = &'a mut Value> {
    o.get_mut(key)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn settings_become_whole_nanoseconds() {
        let v1 = json!({"schema_version": 1, "settings": {"duration_s": 1.5, "interval_s": null,
            "io_timeout_s": 10.0, "loss_timeout_s": 0.2, "streams": 1}});
        let v2 = v1_to_v2(v1);
        assert_eq!(
            v2,
            json!({"schema_version": 2, "settings": {"duration_ns": 1_500_000_000u64,
                "interval_ns": null, "io_timeout_ns": 10_000_000_000u64,
                "loss_timeout_ns": 200_000_000u64, "streams": 1}})
        );
    }

    #[test]
    fn measured_durations_round_to_the_nanoseconds_they_came_from() {
        // What version 1 wrote for 299_999_999 ns and 1 ns: as_secs_f64 of each.
        let odd = std::time::Duration::from_nanos(299_999_999).as_secs_f64();
        let v1 = json!({"points": [{"latency": {"elapsed_s": odd},
            "cpu": {"client": {"user_s": 1e-9, "system_s": 0.25}, "server": {"user_s": 0.0, "system_s": 0.0}},
            "stream": {"streams": [{"sender": {"elapsed_s": 0.3, "cpu": {"user_s": 0.5, "system_s": 0.0},
                                                "intervals": [{"start_s": 0.0, "end_s": 0.1, "bits_per_s": 8.0}]},
                                    "receiver": {"elapsed_s": odd, "loss": {"jitter_s": 1.25e-4}}}],
                       "totals": [{"sender_elapsed_s": 0.3, "receiver_elapsed_s": odd,
                                   "loss": {"jitter_s": 2.5e-4}}]}}]});
        let v2 = v1_to_v2(v1);
        let p = &v2["points"][0];
        assert_eq!(p["latency"], json!({"elapsed_ns": 299_999_999u64}));
        assert_eq!(
            p["cpu"]["client"],
            json!({"user_ns": 1u64, "system_ns": 250_000_000u64})
        );
        let s = &p["stream"]["streams"][0];
        assert_eq!(s["sender"]["elapsed_ns"], 300_000_000u64);
        assert_eq!(s["sender"]["cpu"]["user_ns"], 500_000_000u64);
        assert_eq!(
            s["sender"]["intervals"][0],
            json!({"start_ns": 0u64, "end_ns": 100_000_000u64, "bits_per_s": 8.0})
        );
        assert_eq!(s["receiver"]["elapsed_ns"], 299_999_999u64);
        assert_eq!(
            s["receiver"]["loss"]["jitter_ns"].as_f64(),
            Some(1.25e-4 * 1e9)
        );
        let t = &p["stream"]["totals"][0];
        assert_eq!(
            (&t["sender_elapsed_ns"], &t["receiver_elapsed_ns"]),
            (&json!(300_000_000u64), &json!(299_999_999u64))
        );
        assert_eq!(t["loss"]["jitter_ns"].as_f64(), Some(2.5e-4 * 1e9));
        assert!(t.get("sender_elapsed_s").is_none());
    }

    #[test]
    fn sweep_metrics_become_nanoseconds_and_bits() {
        let v1 = json!({"sweep_metrics": [{"sndbuf": 0, "metrics": {
            "t0_s": 2.5e-5, "t0_ci_s": null, "r_max_bytes_per_s": 1e8,
            "r_max_ci_bytes_per_s": [9e7, 1.1e8], "n_half_bytes": 4000.0,
            "fit": {"t0_s": 2e-5, "r_inf_bytes_per_s": 1.25e8, "n_half_bytes": 2500.0}}}]});
        let m = v1_to_v2(v1)["sweep_metrics"][0]["metrics"].clone();
        assert_eq!(m["t0_ns"].as_f64(), Some(2.5e-5 * 1e9));
        assert_eq!(m["t0_ci_ns"], Value::Null);
        assert_eq!(m["r_max_bits_per_s"].as_f64(), Some(8e8));
        assert_eq!(m["r_max_ci_bits_per_s"], json!([7.2e8, 8.8e8]));
        assert_eq!(m["n_half_bytes"].as_f64(), Some(4000.0));
        assert_eq!(m["fit"]["t0_ns"].as_f64(), Some(2e-5 * 1e9));
        assert_eq!(m["fit"]["r_inf_bits_per_s"].as_f64(), Some(1e9));
        for old in [
            "t0_s",
            "t0_ci_s",
            "r_max_bytes_per_s",
            "r_max_ci_bytes_per_s",
        ] {
            assert!(m.get(old).is_none(), "{old}");
        }
    }

    #[test]
    fn what_is_not_a_document_is_left_to_the_parser() {
        for v in [
            json!(null),
            json!([1, 2]),
            json!({"points": 3, "settings": "x"}),
        ] {
            let mut expected = v.clone();
            if let Some(o) = expected.as_object_mut() {
                o.insert("schema_version".into(), 2.into());
            }
            assert_eq!(v1_to_v2(v), expected);
        }
        // A figure that is not a number keeps its value under the new name.
        let v2 = v1_to_v2(json!({"settings": {"io_timeout_s": "ten"}}));
        assert_eq!(v2["settings"], json!({"io_timeout_ns": "ten"}));
    }
}
