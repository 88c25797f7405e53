//! Text from elsewhere (a peer's messages, an imported file) made safe to print on a terminal.

use std::borrow::Cow;
use std::fmt::Write;

pub mod table;

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

/// The JSON text `json` rewritten so that every string in it reads back as [`printable`] makes
/// it: what [`escape_json_strings`] does to a parsed document, done on the text, so that a
/// large document can be read straight into its types without a `Value` of it in memory (a
/// 200 MB import peaked at 2.5 GB that way). Borrowed when nothing needs escaping. Text that
/// is not valid JSON is left for the parser to refuse.
pub fn escape_json_text(json: &str) -> Cow<'_, str> {
    let bytes = json.as_bytes();
    let mut out: Option<String> = None;
    // Copies json[from..upto] to `out`, once `out` exists.
    let mut copied = 0;
    let mut in_string = false;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if !in_string {
            if b == b'"' {
                in_string = true;
            }
            i += 1;
            continue;
        }
        // Inside a string: what char does the text at i stand for, and how long is it?
        let (c, len) = match b {
            b'"' => {
                in_string = false;
                i += 1;
                continue;
            }
            b'\\' => match bytes.get(i + 1) {
                Some(b'n') => ('\n', 2),
                Some(b'r') => ('\r', 2),
                Some(b't') => ('\t', 2),
                Some(b'b') => ('\u{8}', 2),
                Some(b'f') => ('\u{c}', 2),
                Some(b'u') => {
                    let unit = json
                        .get(i + 2..i + 6)
                        .and_then(|h| u32::from_str_radix(h, 16).ok());
                    match (unit, unit.and_then(char::from_u32)) {
                        (_, Some(c)) => (c, 6),
                        // A surrogate (a pair stands for a char no check here concerns): six
                        // ASCII bytes, left as they are.
                        (Some(_), None) => ('a', 6),
                        // Malformed: the parser refuses it; step over the backslash alone,
                        // so that `i` stays on a char boundary.
                        (None, _) => ('a', 1),
                    }
                }
                Some(b'"' | b'\\' | b'/') => ('a', 2),
                _ => ('a', 1),
            },
            _ => {
                let c = json[i..].chars().next().unwrap_or('a');
                (c, c.len_utf8())
            }
        };
        if is_unsafe(c) {
            let out = out.get_or_insert_with(|| String::with_capacity(json.len() + 64));
            out.push_str(&json[copied..i]);
            // The Rust escape, its backslash escaped for JSON: "\u{1b}" reads back as \u{1b}.
            for e in c.escape_default() {
                if e == '\\' {
                    out.push_str("\\\\");
                } else {
                    out.push(e);
                }
            }
            copied = i + len;
        }
        i += len;
    }
    match out {
        None => Cow::Borrowed(json),
        Some(mut out) => {
            out.push_str(&json[copied..]);
            Cow::Owned(out)
        }
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

    /// The text escape gives what parsing and then escaping gives, for every kind of unsafe
    /// char and every way JSON can write it, and leaves clean text as it is.
    #[test]
    fn escaping_the_text_equals_escaping_the_parsed_document() {
        let cases = [
            r#"{"a":"plain","b":[1,2.5,"x\"y\\z\/"],"c":{"d":null}}"#,
            r#"{"esc":"host\u001b[2Jname","nl":"a\nb\rc\td\be\ff"}"#,
            "{\"raw\":\"csi\u{9b}31m del\u{7f} rtl\u{202e}txt \u{2066}\"}",
            r#"{"u":"\u009b \u007F \u202E \u2069 \u00e9 \ud83d\ude00","k\u001bey":1}"#,
            r#"{"bs":"\\u001b is text, not a control"}"#,
        ];
        for case in cases {
            let mut expected: serde_json::Value = serde_json::from_str(case).unwrap();
            escape_json_strings(&mut expected);
            // Keys too: escape_json_strings leaves keys, so compare values under escaped keys.
            let escaped = escape_json_text(case);
            let got: serde_json::Value = serde_json::from_str(&escaped).unwrap();
            let mut expected_text = serde_json::to_string(&expected).unwrap();
            if case.contains("k\\u001bey") {
                expected_text = expected_text.replace("k\\u001bey", "k\\\\u{1b}ey");
            }
            assert_eq!(
                serde_json::to_string(&got).unwrap(),
                expected_text,
                "{case}"
            );
        }
        assert!(matches!(escape_json_text(cases[0]), Cow::Borrowed(_)));
        // Not JSON: left for the parser.
        for bad in [
            "{\"a\":\"\\u12",
            "{\"a\":\"\\",
            "\"\u{1b}",
            "\"\\u12\u{e9}\u{e9}",
            "\"\\\u{e9}",
        ] {
            let _ = escape_json_text(bad);
        }
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
