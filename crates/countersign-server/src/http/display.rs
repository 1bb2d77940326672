//! What the approver page shows: every signed field as a labelled row, with the characters that
//! can deceive a reader marked.
//!
//! Rows are derived by walking the *signed* fields value, not the profile's list, so nothing that
//! is signed can be left off the page; the profile contributes labels and order. Each string is
//! cut into segments whose concatenation is exactly the signed value; a segment holding a
//! deceptive character carries a kind and a visible name (`U+200B ZERO WIDTH SPACE`), and the page
//! draws a badge for it. Marking never changes the value: the page shows it and a badge.

use countersign::Profile;
use serde::Serialize;
use serde_json::Value;

/// The whole display model of one action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Display {
    /// The profile's title ("Payment transfer").
    pub title: String,
    pub rows: Vec<Row>,
    /// Whether any row carries a mark (the page then shows a banner).
    pub marked: bool,
}

/// One signed leaf value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Row {
    /// The profile's label and, below a top-level field, the key path, as segments.
    pub label: Vec<Segment>,
    /// The JSON path of the value (`params.to`, `params.items[2]`).
    pub path: String,
    /// `string`, `number`, `boolean`, `null`, `object` (empty), `array` (empty).
    pub kind: &'static str,
    pub value: Vec<Segment>,
    /// Row-level warnings (mixed scripts, surrounding spaces).
    pub warnings: Vec<String>,
}

/// A run of text, or one marked character.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Segment {
    pub text: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mark: Option<Mark>,
}

/// Why a character is marked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Mark {
    /// `invisible`, `bidi`, `control`, `space`, `confusable`, `script`.
    pub kind: &'static str,
    /// `U+202E RIGHT-TO-LEFT OVERRIDE`, or `U+0430 looks like "a"`.
    pub name: String,
}

/// Build the display of `fields` under `profile`.
pub(crate) fn display(profile: &Profile, fields: &Value) -> Display {
    let mut rows = Vec::new();
    match fields {
        Value::Object(map) => {
            // Profile order first, then anything else the signed value holds.
            let mut names: Vec<&String> = Vec::new();
            for spec in &profile.fields {
                if let Some((k, _)) = map.get_key_value(&spec.name) {
                    names.push(k);
                }
            }
            for k in map.keys() {
                if !names.contains(&k) {
                    names.push(k);
                }
            }
            for name in names {
                let label = profile
                    .field(name)
                    .map(|s| s.label.clone())
                    .unwrap_or_else(|| name.clone());
                if let Some(v) = map.get(name) {
                    walk(&mut rows, &label, segments(&label), name.clone(), v);
                }
            }
        }
        other => walk(&mut rows, "", Vec::new(), String::new(), other),
    }
    let marked = rows
        .iter()
        .any(|r| !r.warnings.is_empty() || has_mark(&r.value) || has_mark(&r.label));
    Display {
        title: profile.title.clone(),
        rows,
        marked,
    }
}

fn has_mark(segs: &[Segment]) -> bool {
    segs.iter().any(|s| s.mark.is_some())
}

fn walk(rows: &mut Vec<Row>, base: &str, label: Vec<Segment>, path: String, v: &Value) {
    let (kind, text) = match v {
        Value::Object(map) if !map.is_empty() => {
            for (k, child) in map {
                let mut l = label.clone();
                l.push(plain(" › "));
                l.extend(segments(k));
                walk(rows, base, l, format!("{path}.{k}"), child);
            }
            return;
        }
        Value::Array(items) if !items.is_empty() => {
            for (i, child) in items.iter().enumerate() {
                let mut l = label.clone();
                l.push(plain(&format!(" [{i}]")));
                walk(rows, base, l, format!("{path}[{i}]"), child);
            }
            return;
        }
        Value::Object(_) => ("object", "{}".to_owned()),
        Value::Array(_) => ("array", "[]".to_owned()),
        Value::String(s) => ("string", s.clone()),
        Value::Number(n) => ("number", n.to_string()),
        Value::Bool(b) => ("boolean", b.to_string()),
        Value::Null => ("null", "null".to_owned()),
    };
    let mut warnings = Vec::new();
    if kind == "string" {
        if let Some(w) = mixed_scripts(&text) {
            warnings.push(w);
        }
        if text.starts_with(char::is_whitespace) || text.ends_with(char::is_whitespace) {
            warnings.push("leading or trailing whitespace".to_owned());
        }
        if text.is_empty() {
            warnings.push("empty text".to_owned());
        }
    }
    let _ = base;
    rows.push(Row {
        label,
        path,
        kind,
        value: segments(&text),
        warnings,
    });
}

fn plain(text: &str) -> Segment {
    Segment {
        text: text.to_owned(),
        mark: None,
    }
}

/// Cut `text` into unmarked runs and single marked characters; the texts concatenate to `text`.
pub(crate) fn segments(text: &str) -> Vec<Segment> {
    let dominant = dominant_script(text);
    let mut out: Vec<Segment> = Vec::new();
    for c in text.chars() {
        let mark = classify(c).or_else(|| {
            let s = script(c);
            (s != Script::Common && dominant.is_some_and(|d| d != s)).then(|| Mark {
                kind: "script",
                name: format!("{} {} letter", code(c), s.name()),
            })
        });
        match (mark, out.last_mut()) {
            (None, Some(last)) if last.mark.is_none() => last.text.push(c),
            (mark, _) => out.push(Segment {
                text: c.to_string(),
                mark,
            }),
        }
    }
    out
}

fn code(c: char) -> String {
    format!("U+{:04X}", u32::from(c))
}

/// Marks that depend on the character alone.
fn classify(c: char) -> Option<Mark> {
    let cp = u32::from(c);
    let (kind, what): (&'static str, String) = match cp {
        0x202A..=0x202E | 0x2066..=0x2069 | 0x200E | 0x200F | 0x061C => {
            ("bidi", bidi_name(cp).to_owned())
        }
        0x200B..=0x200D
        | 0x2060..=0x2064
        | 0xFEFF
        | 0x00AD
        | 0x034F
        | 0x180E
        | 0x115F
        | 0x1160
        | 0x3164
        | 0xFFA0
        | 0xFE00..=0xFE0F
        | 0xE0000..=0xE007F
        | 0xE0100..=0xE01EF => ("invisible", invisible_name(cp).to_owned()),
        0x00..=0x1F | 0x7F..=0x9F => ("control", "control character".to_owned()),
        0x00A0 | 0x1680 | 0x2000..=0x200A | 0x2028 | 0x2029 | 0x202F | 0x205F | 0x3000 => {
            ("space", "unusual space".to_owned())
        }
        _ => match confusable(c) {
            Some(like) => ("confusable", format!("looks like \"{like}\"")),
            None => return None,
        },
    };
    Some(Mark {
        kind,
        name: format!("{} {what}", code(c)),
    })
}

fn bidi_name(cp: u32) -> &'static str {
    match cp {
        0x202A => "LEFT-TO-RIGHT EMBEDDING",
        0x202B => "RIGHT-TO-LEFT EMBEDDING",
        0x202C => "POP DIRECTIONAL FORMATTING",
        0x202D => "LEFT-TO-RIGHT OVERRIDE",
        0x202E => "RIGHT-TO-LEFT OVERRIDE",
        0x2066 => "LEFT-TO-RIGHT ISOLATE",
        0x2067 => "RIGHT-TO-LEFT ISOLATE",
        0x2068 => "FIRST STRONG ISOLATE",
        0x2069 => "POP DIRECTIONAL ISOLATE",
        0x200E => "LEFT-TO-RIGHT MARK",
        0x200F => "RIGHT-TO-LEFT MARK",
        _ => "ARABIC LETTER MARK",
    }
}

fn invisible_name(cp: u32) -> &'static str {
    match cp {
        0x200B => "ZERO WIDTH SPACE",
        0x200C => "ZERO WIDTH NON-JOINER",
        0x200D => "ZERO WIDTH JOINER",
        0x2060 => "WORD JOINER",
        0xFEFF => "ZERO WIDTH NO-BREAK SPACE",
        0x00AD => "SOFT HYPHEN",
        0xFE00..=0xFE0F | 0xE0100..=0xE01EF => "VARIATION SELECTOR",
        0xE0000..=0xE007F => "TAG CHARACTER",
        _ => "invisible character",
    }
}

/// Characters commonly substituted for ASCII letters and digits (a subset of Unicode's
/// confusables: the Cyrillic and Greek lookalikes, fullwidth forms, and a few Latin ones).
fn confusable(c: char) -> Option<char> {
    let cp = u32::from(c);
    if (0xFF01..=0xFF5E).contains(&cp) {
        return char::from_u32(cp - 0xFF01 + 0x21);
    }
    if (0x1D400..=0x1D7FF).contains(&cp) {
        return Some('?');
    }
    Some(match c {
        'а' => 'a',
        'е' => 'e',
        'о' => 'o',
        'р' => 'p',
        'с' => 'c',
        'у' => 'y',
        'х' => 'x',
        'і' => 'i',
        'ј' => 'j',
        'ѕ' => 's',
        'һ' => 'h',
        'ԁ' => 'd',
        'ԛ' => 'q',
        'ԝ' => 'w',
        'ӏ' => 'l',
        'А' => 'A',
        'В' => 'B',
        'Е' => 'E',
        'К' => 'K',
        'М' => 'M',
        'Н' => 'H',
        'О' => 'O',
        'Р' => 'P',
        'С' => 'C',
        'Т' => 'T',
        'Х' => 'X',
        'У' => 'Y',
        'І' => 'I',
        'Ј' => 'J',
        'Ѕ' => 'S',
        'ο' => 'o',
        'ν' => 'v',
        'α' => 'a',
        'ι' => 'i',
        'κ' => 'k',
        'ρ' => 'p',
        'τ' => 't',
        'υ' => 'u',
        'Α' => 'A',
        'Β' => 'B',
        'Ε' => 'E',
        'Ζ' => 'Z',
        'Η' => 'H',
        'Ι' => 'I',
        'Κ' => 'K',
        'Μ' => 'M',
        'Ν' => 'N',
        'Ο' => 'O',
        'Ρ' => 'P',
        'Τ' => 'T',
        'Υ' => 'Y',
        'Χ' => 'X',
        'ı' => 'i',
        'ɡ' => 'g',
        'ℓ' => 'l',
        'Ⅰ' => 'I',
        'ⅼ' => 'l',
        '٠' => '0',
        '۰' => '0',
        _ => return None,
    })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Script {
    Common,
    Latin,
    Greek,
    Cyrillic,
    Armenian,
    Hebrew,
    Arabic,
    Han,
    Kana,
    Hangul,
    Other,
}

impl Script {
    fn name(self) -> &'static str {
        match self {
            Self::Common => "common",
            Self::Latin => "Latin",
            Self::Greek => "Greek",
            Self::Cyrillic => "Cyrillic",
            Self::Armenian => "Armenian",
            Self::Hebrew => "Hebrew",
            Self::Arabic => "Arabic",
            Self::Han => "Han",
            Self::Kana => "Kana",
            Self::Hangul => "Hangul",
            Self::Other => "other-script",
        }
    }
}

fn script(c: char) -> Script {
    if !c.is_alphabetic() {
        return Script::Common;
    }
    match u32::from(c) {
        0x41..=0x5A | 0x61..=0x7A | 0xAA | 0xBA | 0xC0..=0x24F | 0x1E00..=0x1EFF => Script::Latin,
        0xFF21..=0xFF3A | 0xFF41..=0xFF5A => Script::Latin,
        0x370..=0x3FF | 0x1F00..=0x1FFF => Script::Greek,
        0x400..=0x52F | 0x2DE0..=0x2DFF | 0xA640..=0xA69F | 0x1C80..=0x1C8F => Script::Cyrillic,
        0x530..=0x58F => Script::Armenian,
        0x590..=0x5FF => Script::Hebrew,
        0x600..=0x6FF | 0x750..=0x77F | 0x8A0..=0x8FF => Script::Arabic,
        0x4E00..=0x9FFF | 0x3400..=0x4DBF => Script::Han,
        0x3040..=0x30FF => Script::Kana,
        0xAC00..=0xD7AF | 0x1100..=0x11FF => Script::Hangul,
        _ => Script::Other,
    }
}

/// The most frequent script among the letters, when there are letters of two or more scripts.
fn dominant_script(text: &str) -> Option<Script> {
    let mut counts: Vec<(Script, usize)> = Vec::new();
    for s in text.chars().map(script).filter(|s| *s != Script::Common) {
        match counts.iter_mut().find(|(k, _)| *k == s) {
            Some((_, n)) => *n += 1,
            None => counts.push((s, 1)),
        }
    }
    if counts.len() < 2 {
        return None;
    }
    // Ties go to the script seen first.
    let mut best: Option<(Script, usize)> = None;
    for (s, n) in counts {
        if best.is_none_or(|(_, b)| n > b) {
            best = Some((s, n));
        }
    }
    best.map(|(s, _)| s)
}

fn mixed_scripts(text: &str) -> Option<String> {
    let mut seen: Vec<Script> = Vec::new();
    for s in text.chars().map(script).filter(|s| *s != Script::Common) {
        if !seen.contains(&s) {
            seen.push(s);
        }
    }
    (seen.len() > 1).then(|| {
        let names: Vec<&str> = seen.iter().map(|s| s.name()).collect();
        format!("mixed scripts: {}", names.join(" + "))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use countersign::ProfileRegistry;
    use serde_json::json;

    fn joined(segs: &[Segment]) -> String {
        segs.iter().map(|s| s.text.as_str()).collect()
    }

    fn kinds(segs: &[Segment]) -> Vec<&'static str> {
        segs.iter()
            .filter_map(|s| s.mark.as_ref().map(|m| m.kind))
            .collect()
    }

    fn profile(id: &str) -> Profile {
        ProfileRegistry::builtin().get(id).unwrap().clone()
    }

    #[test]
    fn plain_ascii_is_one_unmarked_segment() {
        let s = segments("DE89 3704 0044 0532 0130 00");
        assert_eq!(s.len(), 1);
        assert!(kinds(&s).is_empty());
    }

    #[test]
    fn each_deceptive_kind_is_marked_and_the_text_is_kept_exactly() {
        for (text, kind) in [
            ("pay\u{200B}pal", "invisible"),
            ("abc\u{202E}fed", "bidi"),
            ("a\u{0007}b", "control"),
            ("1\u{00A0}000", "space"),
            ("раураl", "confusable"),
            ("ＤＥ８９", "confusable"),
        ] {
            let s = segments(text);
            assert_eq!(joined(&s), text);
            assert!(kinds(&s).contains(&kind), "{text:?}: {:?}", kinds(&s));
        }
    }

    #[test]
    fn mixed_scripts_mark_the_minority_letters_and_warn() {
        // Armenian is not in the confusable table: the script rule alone must catch it.
        let text = "pay\u{0570}al";
        let s = segments(text);
        assert_eq!(kinds(&s), vec!["script"]);
        assert_eq!(
            mixed_scripts(text).as_deref(),
            Some("mixed scripts: Latin + Armenian")
        );
        assert_eq!(mixed_scripts("Grüße"), None);
        assert_eq!(mixed_scripts("Привет"), None);
        // A single-script Cyrillic word is not mixed, but its lookalikes are still confusable.
        assert!(kinds(&segments("Привет")).contains(&"confusable"));
    }

    #[test]
    fn every_signed_leaf_is_a_row_with_profile_labels_in_profile_order() {
        let fields = json!({
            "tool_name": "payments.transfer",
            "agent_id": "agent-7",
            "params": {"to": "DE89", "amount": "40000.00", "tags": [], "nested": {"x": [1, true, null]}}
        });
        let d = display(&profile("countersign.tool-call/1"), &fields);
        let labels: Vec<String> = d.rows.iter().map(|r| joined(&r.label)).collect();
        assert_eq!(
            labels,
            vec![
                "Agent",
                "Tool",
                "Parameters › amount",
                "Parameters › nested › x [0]",
                "Parameters › nested › x [1]",
                "Parameters › nested › x [2]",
                "Parameters › tags",
                "Parameters › to",
            ]
        );
        let paths: Vec<&str> = d.rows.iter().map(|r| r.path.as_str()).collect();
        assert_eq!(paths[3], "params.nested.x[0]");
        assert_eq!(d.rows[6].kind, "array");
        assert_eq!(joined(&d.rows[4].value), "true");
        assert!(!d.marked);
    }

    #[test]
    fn deceptive_keys_and_values_set_the_banner() {
        let fields = json!({"agent_id": "a", "tool_name": "t", "params": {"t\u{200B}o": " x"}});
        let d = display(&profile("countersign.tool-call/1"), &fields);
        assert!(d.marked);
        let row = d
            .rows
            .iter()
            .find(|r| r.path == "params.t\u{200B}o")
            .unwrap();
        assert_eq!(kinds(&row.label), vec!["invisible"]);
        assert_eq!(row.warnings, vec!["leading or trailing whitespace"]);
    }

    #[test]
    fn long_values_are_never_cut() {
        let long = "x".repeat(10_000);
        let d = display(
            &profile("countersign.tool-call/1"),
            &json!({"agent_id": long, "tool_name": "t", "params": {}}),
        );
        assert_eq!(joined(&d.rows[0].value).len(), 10_000);
    }
}
