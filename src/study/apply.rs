//! A point's settings: the study's fixed run with each axis's value put in place. Values are
//! set through the settings' serde form (a dotted path into [`Request`] or [`LinkSpec`]) and
//! read back, so every check `run` makes on its settings applies to study values too, and a
//! value that does not fit names its axis.

use anyhow::{anyhow, bail, Result};
use serde_json::Value;

use super::file::{AxisSpec, StudyFile};
use crate::lab::config::LinkSpec;
use crate::request::Request;

/// Where an axis puts its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A dotted path into the run's settings.
    Run(Vec<String>),
    /// A field of the lab link.
    Link(String),
}

/// Short axis names for the settings studies sweep most.
const ALIASES: &[(&str, &str)] = &[
    ("size", "sizes.size"),
    ("write_size", "sizes.write_size"),
    ("read_size", "sizes.read_size"),
    ("request_size", "sizes.request_size"),
    ("response_size", "sizes.response_size"),
    ("window", "buffers.window"),
    ("sndbuf", "buffers.sndbuf"),
    ("rcvbuf", "buffers.rcvbuf"),
    ("server_sndbuf", "buffers.server_sndbuf"),
    ("server_rcvbuf", "buffers.server_rcvbuf"),
    ("nodelay", "socket.nodelay"),
    ("nagle", "socket.nagle"),
    ("cc", "socket.cc"),
    ("mss", "socket.mss"),
    ("rate", "traffic.rate"),
    ("parallel", "traffic.parallel"),
    ("direction", "traffic.direction"),
    ("burst", "traffic.burst"),
    ("duration", "stop.duration"),
    ("pattern", "pattern"),
    ("transport", "transport"),
];

fn target(path: &str) -> Target {
    if let Some(field) = path.strip_prefix("link.") {
        return Target::Link(field.to_string());
    }
    let full = ALIASES
        .iter()
        .find(|(a, _)| *a == path)
        .map_or(path, |(_, p)| p);
    Target::Run(full.split('.').map(str::to_string).collect())
}

/// What an axis sets.
pub fn targets(axis: &AxisSpec) -> Vec<Target> {
    if axis.set.is_empty() {
        vec![target(&axis.name)]
    } else {
        axis.set.iter().map(|p| target(p)).collect()
    }
}

/// Whether any axis changes the lab link.
pub fn has_link_axis(file: &StudyFile) -> bool {
    file.axes
        .iter()
        .any(|a| targets(a).iter().any(|t| matches!(t, Target::Link(_))))
}

/// The settings of the point at `coords`.
pub fn request_for(file: &StudyFile, coords: &[usize]) -> Result<Request> {
    let mut tree = serde_json::to_value(&file.run)?;
    // An axis that sets nodelay to false asks for Nagle's algorithm, against the other
    // points' TCP_NODELAY: a bulk stream must then not turn it off by itself.
    let mut nagle_asked = false;
    for (axis, &k) in file.axes.iter().zip(coords) {
        let value = toml_to_json(&axis.values[k])?;
        for t in targets(axis) {
            if let Target::Run(path) = t {
                nagle_asked |= path == ["socket", "nodelay"] && value == Value::Bool(false);
                tree = put::<Request>(tree, &path, &value)
                    .map_err(|e| anyhow!("axis '{}', value {}: {e}", axis.name, axis.values[k]))?;
            }
        }
    }
    let mut request: Request = serde_json::from_value(tree)?;
    // Only where Nagle exists: a transport axis crossed with a nodelay axis has UDP points too.
    let tcp = request
        .transport
        .capabilities()
        .is_ok_and(|c| c.tcp_options);
    request.socket.nagle |= nagle_asked && tcp;
    Ok(request)
}

/// The lab link of the point at `coords`: the study's `[link]` with the link axes' values;
/// None when the study runs outside the lab.
pub fn link_for(file: &StudyFile, coords: &[usize]) -> Result<Option<LinkSpec>> {
    if file.link.is_none() && !has_link_axis(file) {
        return Ok(None);
    }
    let mut tree = serde_json::to_value(file.link.clone().unwrap_or_default())?;
    for (axis, &k) in file.axes.iter().zip(coords) {
        let value = toml_to_json(&axis.values[k])?;
        for t in targets(axis) {
            if let Target::Link(field) = t {
                let value = if is_no_loss(&field, &value) {
                    Value::Null
                } else {
                    value.clone()
                };
                tree = put::<LinkSpec>(tree, std::slice::from_ref(&field), &value)
                    .map_err(|e| anyhow!("axis '{}', value {}: {e}", axis.name, axis.values[k]))?;
            }
        }
    }
    let spec: LinkSpec = serde_json::from_value(tree)?;
    spec.to_config()
        .map_err(|e| anyhow!("the link at this point: {e:#}"))?;
    if let Some(h) = spec
        .host_cpu
        .as_deref()
        .filter(|h| !matches!(*h, "" | "none"))
    {
        crate::lab::cpu::parse(h).map_err(|e| anyhow!("link.host_cpu: {e:#}"))?;
    }
    Ok(Some(spec))
}

/// A loss axis compares lossy paths with a clean one; `lab up --loss` takes only a share above
/// zero (a loss of nothing is the option left out), so "0%" or 0 on a link's loss means none.
fn is_no_loss(field: &str, value: &Value) -> bool {
    if !matches!(field, "loss" | "loss_back") {
        return false;
    }
    match value {
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s
            .trim()
            .trim_end_matches('%')
            .trim()
            .parse::<f64>()
            .is_ok_and(|x| x == 0.0),
        _ => false,
    }
}

fn toml_to_json(v: &toml::Value) -> Result<Value> {
    Ok(serde_json::to_value(v)?)
}

/// Sets `path` in `tree` to the first form of `value` that the settings accept: as given, as
/// a one-value list (a sweep of one), a size in text as bytes ("4K" = 4096), or a number as
/// text (a rate). Checked by reading the whole tree back, as Request or LinkSpec.
fn put<T: serde::de::DeserializeOwned>(
    tree: Value,
    path: &[String],
    value: &Value,
) -> Result<Value> {
    let mut forms = vec![value.clone(), Value::Array(vec![value.clone()])];
    if let Value::String(s) = value {
        if let Ok(n) = crate::units::parse_bytes(s) {
            forms.push(Value::from(n));
            forms.push(Value::Array(vec![Value::from(n)]));
        }
    }
    if value.is_number() {
        forms.push(Value::String(value.to_string()));
    }
    let mut first_error = None;
    for form in forms {
        let mut t = tree.clone();
        set(&mut t, path, form)?;
        match serde_json::from_value::<T>(t.clone()) {
            Ok(_) => return Ok(t),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    let mut why = first_error.map(|e| e.to_string()).unwrap_or_default();
    if let Value::String(s) = value {
        // Most settings a study sweeps are sizes: say why the text is not one.
        if let Err(e) = crate::units::parse_bytes(s) {
            why = format!("{why}; as a size: {e}");
        }
    }
    Err(anyhow!("{why}"))
}

fn set(tree: &mut Value, path: &[String], value: Value) -> Result<()> {
    let mut node = tree;
    for (i, key) in path.iter().enumerate() {
        let Value::Object(map) = node else {
            bail!("'{}' has no setting '{key}'", path[..i].join("."));
        };
        if !map.contains_key(key) {
            let known: Vec<&str> = map.keys().map(String::as_str).collect();
            bail!(
                "no setting '{}' (there: {})",
                path[..=i].join("."),
                known.join(", ")
            );
        }
        if i + 1 == path.len() {
            map.insert(key.clone(), value);
            return Ok(());
        }
        // Present, as checked above (the borrow checker does not let the message above be
        // built in the branch of get_mut that finds nothing).
        let Some(child) = map.get_mut(key) else {
            bail!("no setting '{}'", path[..=i].join("."));
        };
        node = child;
    }
    bail!("an empty setting path")
}

/// The unit of an axis's numbers (as [`value_number`] gives them): "bytes", "bit/s", "ns"
/// or "" (a count, a share, or a categorical axis).
pub fn axis_unit(axis: &AxisSpec) -> &'static str {
    match targets(axis).first() {
        Some(Target::Run(path)) => {
            let last = path.last().map(String::as_str).unwrap_or_default();
            match (path[0].as_str(), last) {
                ("sizes" | "buffers", _) | (_, "mss") => "bytes",
                (_, "rate") => "bit/s",
                (_, "duration" | "think" | "interval" | "io" | "loss") => "ns",
                _ => "",
            }
        }
        Some(Target::Link(field)) => match field.as_str() {
            "rate" | "rate_back" => "bit/s",
            "delay" | "delay_back" | "jitter" | "jitter_back" => "ns",
            "mtu" => "bytes",
            _ => "",
        },
        None => "",
    }
}

/// How a value is named in tables and legends.
pub fn value_label(axis: &AxisSpec, k: usize) -> String {
    if let Some(l) = axis.labels.get(k) {
        return l.clone();
    }
    match &axis.values[k] {
        toml::Value::String(s) => s.clone(),
        v => v.to_string(),
    }
}

/// A value as a number for axes and neighbours (bytes, bit/s, ns, shares), when it is one.
pub fn value_number(axis: &AxisSpec, k: usize) -> Option<f64> {
    match &axis.values[k] {
        toml::Value::Integer(i) => Some(*i as f64),
        toml::Value::Float(f) => Some(*f),
        toml::Value::String(s) => {
            let link = targets(axis)
                .first()
                .is_some_and(|t| matches!(t, Target::Link(_)));
            if let (false, Ok(n)) = (link, crate::units::parse_bytes(s)) {
                return Some(n as f64);
            }
            if let Ok(d) = crate::units::parse_duration(s) {
                return Some(d.as_nanos() as f64);
            }
            if let Ok(crate::units::Rate::BitsPerSecond(b)) = crate::units::parse_rate(s) {
                return Some(b);
            }
            crate::units::parse_percent(s).ok()
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pattern::PatternKind;

    fn file(text: &str) -> StudyFile {
        StudyFile::parse(&format!("name = \"t\"\n{text}")).unwrap()
    }

    #[test]
    fn axis_values_land_in_the_run_settings_in_the_form_they_take() {
        let f = file(
            "[run]\npattern = \"stream\"\n[[axis]]\nname = \"window\"\nvalues = [\"4K\", 8192]\n[[axis]]\nname = \"nodelay\"\nvalues = [false, true]\n[[axis]]\nname = \"rate\"\nvalues = [\"100M\"]\n[[axis]]\nname = \"buffers.server_rcvbuf\"\nvalues = [\"1M\"]\n",
        );
        let r = request_for(&f, &[0, 1, 0, 0]).unwrap();
        assert_eq!(r.pattern, PatternKind::Stream);
        assert_eq!(r.buffers.window, Some(vec![4096]));
        assert!(r.socket.nodelay);
        assert_eq!(
            r.traffic.rate,
            Some(crate::units::Rate::BitsPerSecond(100e6))
        );
        assert_eq!(r.buffers.server_rcvbuf, Some(vec![1 << 20]));
        let r = request_for(&f, &[1, 0, 0, 0]).unwrap();
        assert_eq!(r.buffers.window, Some(vec![8192]));
        assert!(!r.socket.nodelay);
        // nodelay = false on an axis is Nagle asked for: no bulk stream turns it off.
        assert!(r.socket.nagle);
        assert!(!request_for(&f, &[0, 1, 0, 0]).unwrap().socket.nagle);
        // Not where there is no Nagle: a transport axis crossed with the nodelay axis.
        let f = file(
            "[[axis]]\nname = \"transport\"\nvalues = [\"udp\", \"tcp\"]\n[[axis]]\nname = \"nodelay\"\nvalues = [false]\n",
        );
        assert!(!request_for(&f, &[0, 0]).unwrap().socket.nagle);
        assert!(request_for(&f, &[1, 0]).unwrap().socket.nagle);
    }

    #[test]
    fn one_axis_can_set_several_settings() {
        let f = file(
            "[[axis]]\nname = \"buffer pair\"\nset = [\"sndbuf\", \"rcvbuf\"]\nvalues = [\"64K\"]\n",
        );
        let r = request_for(&f, &[0]).unwrap();
        assert_eq!(r.buffers.sndbuf, Some(vec![65536]));
        assert_eq!(r.buffers.rcvbuf, Some(vec![65536]));
    }

    #[test]
    fn a_value_that_does_not_fit_names_its_axis() {
        let f = file("[[axis]]\nname = \"window\"\nvalues = [\"4Q\"]\n");
        let e = request_for(&f, &[0]).unwrap_err().to_string();
        assert!(e.starts_with("axis 'window', value \"4Q\""), "{e}");
        let f = file("[[axis]]\nname = \"sockets.nodelay\"\nvalues = [true]\n");
        let e = request_for(&f, &[0]).unwrap_err().to_string();
        assert!(e.contains("no setting 'sockets'"), "{e}");
    }

    #[test]
    fn link_axes_change_the_lab_link() {
        let f = file(
            "[link]\nrate = \"10mbit\"\n[[axis]]\nname = \"link.delay\"\nvalues = [\"1ms\", \"20ms\"]\nlabels = [\"campus\", \"wan\"]\n",
        );
        assert!(has_link_axis(&f));
        let l = link_for(&f, &[1]).unwrap().unwrap();
        assert_eq!(l.delay, Some(std::time::Duration::from_millis(20)));
        assert_eq!(l.rate.as_deref(), Some("10mbit"));
        assert_eq!(value_label(&f.axes[0], 1), "wan");
        assert_eq!(value_number(&f.axes[0], 1), Some(20e6));
        let none = file("[[axis]]\nname = \"window\"\nvalues = [1]\n");
        assert_eq!(link_for(&none, &[0]).unwrap(), None);
        // A clean path next to lossy ones: "0%" and 0 are no loss, anything else is checked.
        let clean = file(
            "[link]\nloss = \"1%\"\n[[axis]]\nname = \"link.loss\"\nvalues = [\"0%\", 0, \"0.1%\", \"-1%\"]\n",
        );
        assert_eq!(link_for(&clean, &[0]).unwrap().unwrap().loss, None);
        assert_eq!(link_for(&clean, &[1]).unwrap().unwrap().loss, None);
        assert_eq!(
            link_for(&clean, &[2]).unwrap().unwrap().loss.as_deref(),
            Some("0.1%")
        );
        assert!(link_for(&clean, &[3]).is_err());
        let bad = file("[[axis]]\nname = \"link.rate\"\nvalues = [\"1kbit\"]\n");
        assert!(link_for(&bad, &[0])
            .unwrap_err()
            .to_string()
            .contains("8 kbit/s"));
    }

    #[test]
    fn numbers_of_values() {
        let f = file("[[axis]]\nname = \"window\"\nvalues = [\"4K\", 100, \"cubic\"]\n");
        assert_eq!(value_number(&f.axes[0], 0), Some(4096.0));
        assert_eq!(value_number(&f.axes[0], 1), Some(100.0));
        assert_eq!(value_number(&f.axes[0], 2), None);
        assert_eq!(value_label(&f.axes[0], 0), "4K");
    }
}
