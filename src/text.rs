//! Text from elsewhere (a peer's messages, an imported file) made safe to print on a terminal.

use std::borrow::Cow;
use std::fmt::Write;

/// `s` with every control character escaped (`\x1b` becomes `\u{1b}`, a newline `\n`), so
/// that a peer's or a file's text can move no cursor, clear no screen, set no window title
/// and forge no extra line of output. Text without control characters comes back borrowed.
pub fn printable(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_unsafe) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if is_unsafe(c) {
            let _ = write!(out, "{}", c.escape_default());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Like [`printable`], but keeps line breaks: for a whole block of output made of lines
/// (a table, a listing) whose fields came from elsewhere.
pub fn printable_lines(s: &str) -> Cow<'_, str> {
    if !s.chars().any(|c| c != '\n' && is_unsafe(c)) {
        return Cow::Borrowed(s);
    }
    let lines: Vec<Cow<'_, str>> = s.split('\n').map(printable).collect();
    Cow::Owned(lines.join("\n"))
}

/// Escapes, as [`printable`] does, every string in a JSON document: a result file or a
/// peer's message is made safe once, where it enters, for every place that prints it later.
pub fn escape_json_strings(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::String(s) => {
            if let Cow::Owned(escaped) = printable(s) {
                *s = escaped;
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(escape_json_strings),
        serde_json::Value::Object(fields) => fields.values_mut().for_each(escape_json_strings),
        _ => {}
    }
}

/// `v` with every string in it escaped as by [`printable`] (through its JSON form); `v`
/// unchanged if it has no JSON form that reads back.
pub fn sanitized<T: serde::Serialize + serde::de::DeserializeOwned>(v: T) -> T {
    let Ok(mut json) = serde_json::to_value(&v) else {
        return v;
    };
    escape_json_strings(&mut json);
    serde_json::from_value(json).unwrap_or(v)
}

/// C0 and C1 controls and DEL (terminals act on all of them; C1's CSI, U+009B, starts an
/// escape sequence on its own), and the bidirectional overrides that reorder what is shown.
fn is_unsafe(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_sequences_and_controls_are_escaped() {
        assert_eq!(printable("host\x1b[2Jname"), "host\\u{1b}[2Jname");
        assert_eq!(printable("a\nb\rc\td"), "a\\nb\\rc\\td");
        assert_eq!(printable("csi\u{9b}31m"), "csi\\u{9b}31m");
        assert_eq!(printable("del\u{7f}"), "del\\u{7f}");
        assert_eq!(printable("rtl\u{202e}txt"), "rtl\\u{202e}txt");
        assert!(!printable("\x07\x08\x1b]0;title\x07").contains(|c: char| c.is_control()));
    }

    #[test]
    fn lines_keep_their_breaks_and_lose_their_escapes() {
        assert_eq!(printable_lines("a\x1b[2J\nb\r\n"), "a\\u{1b}[2J\nb\\r\n");
        assert!(matches!(printable_lines("a\nb\n"), Cow::Borrowed(_)));
    }

    #[test]
    fn every_string_of_a_document_is_escaped() {
        let mut v = serde_json::json!({"a": "x\u{1b}[2J", "b": [{"c": "y\nz"}, 3], "d": null});
        escape_json_strings(&mut v);
        assert_eq!(v["a"], "x\\u{1b}[2J");
        assert_eq!(v["b"][0]["c"], "y\\nz");
        let env = crate::env::Environment {
            hostname: "h\u{1b}]0;t\u{7}".into(),
            ..Default::default()
        };
        assert_eq!(sanitized(env).hostname, "h\\u{1b}]0;t\\u{7}");
    }

    #[test]
    fn ordinary_text_is_borrowed_unchanged() {
        let s = "Linux 6.8 x86_64, 4 CPUs — µs, ü, 測試";
        assert!(matches!(printable(s), Cow::Borrowed(x) if x == s));
    }
}
