//! What the approver page shows: every signed field as a labelled row, the same fields as JSON,
//! and the request sentence, with the characters that can deceive a reader marked.
//!
//! Rows are derived by walking the *signed* fields value, not the profile's list, so nothing that
//! is signed can be left off the page; the profile contributes labels and order. Each string is
//! cut into segments whose concatenation is exactly the value; a segment holding a deceptive
//! character carries a kind and a visible name (`U+200B ZERO WIDTH SPACE`), and the page draws a
//! badge for it. Marking never changes the value: the page shows it and a badge.
//!
//! The JSON view is built from the same segments (never from `JSON.stringify` in the page), so a
//! right-to-left override or a lookalike is marked there exactly as in the table, and the page
//! isolates every marked character so a bidi control cannot reorder the text around it.
//!
//! When the tool's rule normalizes instead of refusing non-NFC text (`nfc = "normalize"`), the
//! display is of the value *as the gateway submitted it*, and every code point NFC changed is
//! marked: the approver sees what the gateway will execute, and that it differs from what is
//! hashed.

use countersign::Profile;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use unicode_normalization::UnicodeNormalization as _;

/// The whole display model of one action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Display {
    /// The profile's title ("Payment transfer").
    pub title: String,
    pub rows: Vec<Row>,
    /// The agent of the "Request from agent X for tool Y" sentence, marked like a value.
    pub agent_id: Vec<Segment>,
    /// The tool of that sentence, marked like a value.
    pub tool_name: Vec<Segment>,
    /// The fields as indented JSON: the concatenated texts are exactly
    /// `serde_json::to_string_pretty` of the displayed value; strings and keys carry the same
    /// marks as the rows.
    pub json: Vec<Segment>,
    /// Whether any row, the sentence or an NFC change carries a mark (the page then shows a
    /// banner).
    pub marked: bool,
    /// Whether the displayed strings are the submitted ones and some differ from their NFC form
    /// (the signed form): the page then says so above the table.
    pub nfc_changed: bool,
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
    /// The value with its integer digits grouped by thousands (thin spaces), for a decimal with
    /// four or more integer digits: a reading aid shown beside the exact value, never instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grouped: Option<String>,
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
    /// Deceptive: `invisible`, `bidi`, `control`, `space`, `confusable`, `script`, `nfc`.
    /// Quiet (line structure of a text that may span lines, shown but raising no alarm): `line`,
    /// `tab`.
    pub kind: &'static str,
    /// `U+202E RIGHT-TO-LEFT OVERRIDE`, or `U+0430 looks like "a"`.
    pub name: String,
}

impl Mark {
    /// A line break or tab in a text that may span lines: drawn as structure, never an alarm.
    pub fn is_quiet(&self) -> bool {
        matches!(self.kind, "line" | "tab")
    }
}

/// Whether a string may span lines. A file's content, a message or any other value inside a
/// structured field is text: its line breaks (LF, CRLF) and tabs are its layout, shown as such.
/// A name (a member name, the agent, the tool) or a top-level field the profile types as a scalar
/// (an account, an amount, a reference) is one line: a line break there can make one value look
/// like two, so it is marked like any other control character.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lines {
    One,
    Many,
}

impl Lines {
    /// For the value of top-level field `name` under `profile`.
    fn of_field(profile: &Profile, name: &str) -> Self {
        // Only a structured field holds text; anything else, known or not, is held to one line.
        match profile.field(name).map(|s| s.kind) {
            Some(countersign::FieldKind::Object | countersign::FieldKind::Any) => Self::Many,
            _ => Self::One,
        }
    }
}

/// The code points NFC changes, per string: RFC 6901 pointer of the string (a value, or the
/// member whose key it is) to those code points.
pub(crate) type NfcMarks = BTreeMap<String, Vec<char>>;

/// What one request shows besides its fields.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sentence<'a> {
    pub agent_id: &'a str,
    pub tool_name: &'a str,
}

/// The display of one request as the approver page renders it: `fields` as shown (the submitted
/// strings when `nfc` is not empty), the agent and the tool, and the code points NFC changes per
/// JSON pointer. Public for `countersign approve`, which builds it from the fields it hashes
/// itself rather than take the service's.
pub fn review_display(
    profile: &Profile,
    fields: &Value,
    agent_id: &str,
    tool_name: &str,
    nfc: &BTreeMap<String, Vec<char>>,
) -> Display {
    display(
        profile,
        fields,
        Sentence {
            agent_id,
            tool_name,
        },
        nfc,
    )
}

/// Build the display of `fields` under `profile`. `nfc` names the code points NFC changes in
/// `fields` (empty when `fields` is already the NFC form).
pub(crate) fn display(
    profile: &Profile,
    fields: &Value,
    request: Sentence<'_>,
    nfc: &NfcMarks,
) -> Display {
    let mut rows = Vec::new();
    let mut w = Walker {
        rows: &mut rows,
        nfc,
    };
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
                let pointer = format!("/{}", escape_pointer(name));
                let label = profile
                    .field(name)
                    .map(|s| segments(&s.label))
                    .unwrap_or_else(|| w.key_segments(name, &pointer));
                let decimal = profile
                    .field(name)
                    .is_some_and(|s| s.kind == countersign::FieldKind::Decimal);
                if let Some(v) = map.get(name) {
                    let lines = Lines::of_field(profile, name);
                    w.walk(label, name.clone(), &pointer, v, decimal, lines);
                }
            }
        }
        other => w.walk(Vec::new(), String::new(), "", other, false, Lines::Many),
    }
    let mut json = Vec::new();
    let mut jw = JsonWriter {
        out: &mut json,
        nfc,
        profile,
    };
    jw.value(fields, "", 0, Lines::Many);
    let agent_id = segments(request.agent_id);
    let tool_name = segments(request.tool_name);
    let nfc_changed = !nfc.is_empty();
    let marked = nfc_changed
        || has_mark(&agent_id)
        || has_mark(&tool_name)
        || rows
            .iter()
            .any(|r| !r.warnings.is_empty() || has_mark(&r.value) || has_mark(&r.label));
    Display {
        title: profile.title.clone(),
        rows,
        agent_id,
        tool_name,
        json,
        marked,
        nfc_changed,
    }
}

/// Whether any segment carries a mark that raises the banner (quiet line structure does not).
fn has_mark(segs: &[Segment]) -> bool {
    segs.iter()
        .any(|s| s.mark.as_ref().is_some_and(|m| !m.is_quiet()))
}

/// RFC 6901: `~` is written `~0` and `/` is written `~1`.
fn escape_pointer(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

struct Walker<'a> {
    rows: &'a mut Vec<Row>,
    nfc: &'a NfcMarks,
}

impl Walker<'_> {
    fn nfc_at(&self, pointer: &str) -> &[char] {
        self.nfc.get(pointer).map_or(&[], Vec::as_slice)
    }

    fn key_segments(&self, key: &str, pointer: &str) -> Vec<Segment> {
        segments_nfc(key, self.nfc_at(pointer))
    }

    fn walk(
        &mut self,
        label: Vec<Segment>,
        path: String,
        pointer: &str,
        v: &Value,
        decimal: bool,
        lines: Lines,
    ) {
        let (kind, text) = match v {
            Value::Object(map) if !map.is_empty() => {
                return self.walk_object(&label, &path, pointer, map);
            }
            Value::Array(items) if !items.is_empty() => {
                return self.walk_array(&label, &path, pointer, items);
            }
            Value::Object(_) => ("object", "{}".to_owned()),
            Value::Array(_) => ("array", "[]".to_owned()),
            Value::String(s) => ("string", s.clone()),
            Value::Number(n) => ("number", n.to_string()),
            Value::Bool(b) => ("boolean", b.to_string()),
            Value::Null => ("null", "null".to_owned()),
        };
        let mut warnings = if kind == "string" {
            text_warnings(&text, lines)
        } else {
            Vec::new()
        };
        let grouped = if kind == "number" || decimal || looks_like_amount(&path) {
            group_digits(&text)
        } else {
            None
        };
        let value = segments_in(&text, self.nfc_at(pointer), lines);
        if !self.nfc_at(pointer).is_empty() && has_mark(&value) {
            warnings.push("not in NFC: the signed form differs from this text".to_owned());
        }
        self.rows.push(Row {
            label,
            path,
            kind,
            value,
            grouped,
            warnings,
        });
    }

    /// A non-empty object's members, in order, each labelled `label › key`.
    fn walk_object(
        &mut self,
        label: &[Segment],
        path: &str,
        pointer: &str,
        map: &serde_json::Map<String, Value>,
    ) {
        for (k, child) in map {
            let child_pointer = format!("{pointer}/{}", escape_pointer(k));
            let mut l = label.to_vec();
            l.push(plain(" › "));
            l.extend(self.key_segments(k, &child_pointer));
            self.walk(
                l,
                format!("{path}.{k}"),
                &child_pointer,
                child,
                false,
                Lines::Many,
            );
        }
    }

    /// A non-empty array's items, in order, each labelled `label [i]`.
    fn walk_array(&mut self, label: &[Segment], path: &str, pointer: &str, items: &[Value]) {
        for (i, child) in items.iter().enumerate() {
            let mut l = label.to_vec();
            l.push(plain(&format!(" [{i}]")));
            let child_pointer = format!("{pointer}/{i}");
            self.walk(
                l,
                format!("{path}[{i}]"),
                &child_pointer,
                child,
                false,
                Lines::Many,
            );
        }
    }
}

/// The warnings a signed text earns by itself: mixed scripts, padding at either end, emptiness.
fn text_warnings(text: &str, lines: Lines) -> Vec<String> {
    let mut warnings = Vec::new();
    if let Some(w) = mixed_scripts(text) {
        warnings.push(w);
    }
    // A text's final line break is its layout, not padding that hides a difference.
    let edges = match lines {
        Lines::One => text,
        Lines::Many => text.trim_matches(['\n', '\r', '\t']),
    };
    if edges.starts_with(char::is_whitespace) || edges.ends_with(char::is_whitespace) {
        warnings.push("leading or trailing whitespace".to_owned());
    }
    if text.is_empty() {
        warnings.push("empty text".to_owned());
    }
    warnings
}

/// Whether the last key of `path` names an amount (`amount`, `total_amount`, `price`, ...):
/// decimal strings under such keys get the grouped reading aid even outside a typed profile.
fn looks_like_amount(path: &str) -> bool {
    let last = path
        .rsplit(['.', '['])
        .next()
        .unwrap_or(path)
        .to_ascii_lowercase();
    ["amount", "total", "price", "sum", "value", "quantity"]
        .iter()
        .any(|w| last.contains(w))
}

/// `40000.00` -> `40 000.00` (U+2009 THIN SPACE between groups of three integer digits), for a
/// plain decimal (`-?[0-9]+(\.[0-9]+)?`) with at least four integer digits; `None` otherwise.
pub(crate) fn group_digits(text: &str) -> Option<String> {
    let (sign, rest) = match text.strip_prefix('-') {
        Some(r) => ("-", r),
        None => ("", text),
    };
    let (int, frac) = match rest.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (rest, None),
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(int) || int.len() < 4 || frac.is_some_and(|f| !digits(f)) {
        return None;
    }
    let mut out = String::from(sign);
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            out.push('\u{2009}');
        }
        out.push(c);
    }
    if let Some(f) = frac {
        out.push('.');
        out.push_str(f);
    }
    Some(out)
}

/// Writes a value as `serde_json::to_string_pretty` does, as segments: punctuation and
/// indentation plain, keys and strings cut and marked like the rows.
struct JsonWriter<'a> {
    out: &'a mut Vec<Segment>,
    nfc: &'a NfcMarks,
    /// Which top-level fields are one line (see [`Lines`]).
    profile: &'a Profile,
}

impl JsonWriter<'_> {
    fn push(&mut self, text: &str) {
        match self.out.last_mut() {
            Some(last) if last.mark.is_none() => last.text.push_str(text),
            _ => self.out.push(plain(text)),
        }
    }

    fn string(&mut self, s: &str, pointer: &str, lines: Lines) {
        self.push("\"");
        let nfc = self.nfc.get(pointer).map_or(&[][..], Vec::as_slice);
        for seg in segments_in(s, nfc, lines) {
            // Escaping is per character, so escaping each segment escapes the whole string.
            let quoted = serde_json::to_string(&seg.text).unwrap_or_default();
            let escaped = quoted
                .strip_prefix('"')
                .and_then(|q| q.strip_suffix('"'))
                .unwrap_or_default();
            match seg.mark {
                None => self.push(escaped),
                Some(mark) => self.out.push(Segment {
                    text: escaped.to_owned(),
                    mark: Some(mark),
                }),
            }
        }
        self.push("\"");
    }

    fn indent(&mut self, depth: usize) {
        self.push("\n");
        self.push(&"  ".repeat(depth));
    }

    fn value(&mut self, v: &Value, pointer: &str, depth: usize, lines: Lines) {
        match v {
            Value::Object(map) if !map.is_empty() => {
                self.push("{");
                for (i, (k, child)) in map.iter().enumerate() {
                    if i > 0 {
                        self.push(",");
                    }
                    self.indent(depth + 1);
                    let child_pointer = format!("{pointer}/{}", escape_pointer(k));
                    self.string(k, &child_pointer, Lines::One);
                    self.push(": ");
                    let lines = match depth {
                        0 => Lines::of_field(self.profile, k),
                        _ => Lines::Many,
                    };
                    self.value(child, &child_pointer, depth + 1, lines);
                }
                self.indent(depth);
                self.push("}");
            }
            Value::Array(items) if !items.is_empty() => {
                self.push("[");
                for (i, child) in items.iter().enumerate() {
                    if i > 0 {
                        self.push(",");
                    }
                    self.indent(depth + 1);
                    self.value(child, &format!("{pointer}/{i}"), depth + 1, Lines::Many);
                }
                self.indent(depth);
                self.push("]");
            }
            Value::Object(_) => self.push("{}"),
            Value::Array(_) => self.push("[]"),
            Value::String(s) => self.string(s, pointer, lines),
            other => self.push(&other.to_string()),
        }
    }
}

fn plain(text: &str) -> Segment {
    Segment {
        text: text.to_owned(),
        mark: None,
    }
}

/// Cut `text` into unmarked runs and single marked characters; the texts concatenate to `text`.
pub(crate) fn segments(text: &str) -> Vec<Segment> {
    segments_nfc(text, &[])
}

/// [`segments`], with every code point of `nfc` (those NFC changes in this string) marked first.
fn segments_nfc(text: &str, nfc: &[char]) -> Vec<Segment> {
    segments_in(text, nfc, Lines::One)
}

/// [`segments_nfc`] for a string that is one line or may span lines: in the latter, each LF,
/// CRLF and tab is a segment of its own with a quiet mark (the page draws the line structure);
/// a lone CR, a vertical tab, a form feed or any other control stays a deceptive mark.
fn segments_in(text: &str, nfc: &[char], lines: Lines) -> Vec<Segment> {
    let dominant = dominant_script(text);
    let mut out: Vec<Segment> = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if lines == Lines::Many {
            let quiet = match c {
                '\n' => Some(("\n", "line", "U+000A line break")),
                '\r' if chars.peek() == Some(&'\n') => {
                    chars.next();
                    Some(("\r\n", "line", "U+000D U+000A line break"))
                }
                '\t' => Some(("\t", "tab", "U+0009 tab")),
                _ => None,
            };
            if let Some((text, kind, name)) = quiet {
                out.push(Segment {
                    text: text.to_owned(),
                    mark: Some(Mark {
                        kind,
                        name: name.to_owned(),
                    }),
                });
                continue;
            }
        }
        let mark = nfc_mark(c, nfc).or_else(|| classify(c)).or_else(|| {
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

/// The mark of a code point NFC changes: what it becomes, when it changes on its own
/// (`U+212A KELVIN SIGN becomes "K" in NFC`), or that NFC combines it with its neighbours.
fn nfc_mark(c: char, nfc: &[char]) -> Option<Mark> {
    if !nfc.contains(&c) {
        return None;
    }
    let alone: String = std::iter::once(c).nfc().collect();
    let name = nfc_name(c).map(|n| format!(" {n}")).unwrap_or_default();
    let what = if alone.chars().eq(std::iter::once(c)) {
        "is combined with its neighbours by NFC".to_owned()
    } else {
        let codes: Vec<String> = alone.chars().map(code).collect();
        format!("becomes \"{alone}\" ({}) in NFC", codes.join(" "))
    };
    Some(Mark {
        kind: "nfc",
        name: format!("{}{name} {what}", code(c)),
    })
}

/// Names of the singletons NFC replaces that are commonly used to spoof (the examples).
fn nfc_name(c: char) -> Option<&'static str> {
    Some(match c {
        '\u{212A}' => "KELVIN SIGN",
        '\u{2126}' => "OHM SIGN",
        '\u{212B}' => "ANGSTROM SIGN",
        '\u{037E}' => "GREEK QUESTION MARK",
        '\u{0387}' => "GREEK ANO TELEIA",
        '\u{0340}' => "COMBINING GRAVE TONE MARK",
        '\u{0341}' => "COMBINING ACUTE TONE MARK",
        '\u{1FEF}' => "GREEK VARIA",
        '\u{2000}' => "EN QUAD",
        '\u{2001}' => "EM QUAD",
        '\u{F900}'..='\u{FAFF}' | '\u{2F800}'..='\u{2FA1F}' => "CJK COMPATIBILITY IDEOGRAPH",
        _ => return None,
    })
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

    const REQ: Sentence<'static> = Sentence {
        agent_id: "agent-7",
        tool_name: "payments.transfer",
    };

    fn show(profile_id: &str, fields: &Value) -> Display {
        display(&profile(profile_id), fields, REQ, &NfcMarks::new())
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
        let d = show("countersign.tool-call/1", &fields);
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
        let d = show("countersign.tool-call/1", &fields);
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
        let d = show(
            "countersign.tool-call/1",
            &json!({"agent_id": long, "tool_name": "t", "params": {}}),
        );
        assert_eq!(joined(&d.rows[0].value).len(), 10_000);
    }

    fn row<'d>(d: &'d Display, path: &str) -> &'d Row {
        d.rows.iter().find(|r| r.path == path).unwrap()
    }

    #[test]
    fn ordinary_multi_line_content_raises_no_alarm() {
        let content = "first line\n\tindented\r\nlast line\n";
        let fields = json!({"agent_id": "a", "server_id": "fs", "tool_name": "write_file",
                            "params": {"path": "/tmp/notes.txt", "content": content}});
        let d = show("countersign.mcp-tool-call/1", &fields);
        assert!(!d.marked, "a file write is no alarm");
        let r = row(&d, "params.content");
        assert!(r.warnings.is_empty(), "{:?}", r.warnings);
        assert_eq!(joined(&r.value), content, "the text is kept exactly");
        assert_eq!(kinds(&r.value), vec!["line", "tab", "line", "line"]);
        let crlf = r.value.iter().find(|s| s.text == "\r\n").unwrap();
        assert_eq!(crlf.mark.as_ref().unwrap().name, "U+000D U+000A line break");
        // The JSON view shows the escapes, quietly.
        assert!(!has_mark(&d.json));
        let quiet: Vec<&str> = d
            .json
            .iter()
            .filter(|s| s.mark.as_ref().is_some_and(Mark::is_quiet))
            .map(|s| s.text.as_str())
            .collect();
        assert_eq!(quiet, vec!["\\n", "\\t", "\\r\\n", "\\n"]);
    }

    #[test]
    fn surrounding_spaces_still_warn_in_text_but_its_final_line_break_does_not() {
        let show_content = |content: &str| {
            let fields = json!({"agent_id": "a", "tool_name": "t", "params": {"content": content}});
            row(&show("countersign.tool-call/1", &fields), "params.content")
                .warnings
                .clone()
        };
        assert!(show_content("text\n").is_empty());
        assert!(show_content("\ntext").is_empty());
        assert_eq!(
            show_content(" text\n"),
            vec!["leading or trailing whitespace"]
        );
        assert_eq!(
            show_content("text \n"),
            vec!["leading or trailing whitespace"]
        );
    }

    #[test]
    fn a_line_break_where_one_line_is_expected_is_marked() {
        // A payment's account, a member name, the tool in the sentence: one line each.
        let fields = json!({"amount": "10.00", "currency": "EUR", "source_account": "DE01",
                            "destination_account": "DE02", "reference": "Invoice 7\nAmount: 1.00"});
        let d = show("countersign.payment/1", &fields);
        assert!(d.marked);
        assert_eq!(kinds(&row(&d, "reference").value), vec!["control"]);
        let fields = json!({"agent_id": "a", "tool_name": "t", "params": {"pa\nth": "/x"}});
        let d = show("countersign.tool-call/1", &fields);
        assert!(d.marked);
        let d = display(
            &profile("countersign.tool-call/1"),
            &json!({"agent_id": "a", "tool_name": "t", "params": {}}),
            Sentence {
                agent_id: "agent-7",
                tool_name: "read_file\nwrite_file",
            },
            &NfcMarks::new(),
        );
        assert!(d.marked);
        assert_eq!(kinds(&d.tool_name), vec!["control"]);
    }

    #[test]
    fn other_controls_and_separators_alarm_inside_text_too() {
        for (content, kind) in [
            ("a\rb", "control"),
            ("a\u{b}b", "control"),
            ("a\u{c}b", "control"),
            ("a\u{85}b", "control"),
            ("a\u{2028}b", "space"),
            ("a\u{200B}b", "invisible"),
            ("a\u{202E}b", "bidi"),
        ] {
            let fields = json!({"agent_id": "a", "tool_name": "t", "params": {"content": content}});
            let d = show("countersign.tool-call/1", &fields);
            assert!(d.marked, "{content:?}");
            assert_eq!(
                kinds(&row(&d, "params.content").value),
                vec![kind],
                "{content:?}"
            );
        }
    }

    #[test]
    fn the_json_view_is_the_pretty_json_with_the_rows_marks() {
        // The right-to-left override that spoofs `invoice\u202Efdp.exe` as "invoiceexe.pdf" in a
        // plain JSON.stringify view is a marked segment of its own here.
        let fields = json!({
            "agent_id": "agent-7",
            "tool_name": "files.send",
            "params": {"file": "invoice\u{202E}fdp.exe", "n": [1, -2.5, null, true, {}, []],
                       "q\"\\": "tab\there\u{7}"}
        });
        let d = show("countersign.tool-call/1", &fields);
        assert_eq!(
            joined(&d.json),
            serde_json::to_string_pretty(&fields).unwrap()
        );
        let marked: Vec<(&str, &str)> = d
            .json
            .iter()
            .filter_map(|s| s.mark.as_ref().map(|m| (s.text.as_str(), m.kind)))
            .collect();
        // The control character is shown as its JSON escape, still marked.
        assert_eq!(
            marked,
            vec![("\u{202E}", "bidi"), ("\\t", "tab"), ("\\u0007", "control")]
        );
        // The text after the override is a plain segment of its own: the page isolates the
        // marked character, so it cannot reverse what follows.
        let after = d
            .json
            .iter()
            .position(|s| s.mark.as_ref().is_some_and(|m| m.kind == "bidi"))
            .and_then(|i| d.json.get(i + 1))
            .unwrap();
        assert!(after.text.starts_with("fdp.exe\""), "{after:?}");
        assert!(after.mark.is_none());
    }

    #[test]
    fn the_json_view_of_plain_fields_has_no_mark() {
        let fields = json!({"agent_id": "a", "tool_name": "t", "params": {"to": "DE89"}});
        let d = show("countersign.tool-call/1", &fields);
        assert!(!has_mark(&d.json));
        assert_eq!(d.json.len(), 1);
    }

    #[test]
    fn the_request_sentence_marks_a_confusable_tool_name_and_raises_the_banner() {
        let fields = json!({"agent_id": "a", "tool_name": "t", "params": {}});
        let p = profile("countersign.tool-call/1");
        let d = display(
            &p,
            &fields,
            Sentence {
                agent_id: "agent-7",
                tool_name: "p\u{0430}yments.transfer",
            },
            &NfcMarks::new(),
        );
        assert_eq!(joined(&d.tool_name), "p\u{0430}yments.transfer");
        assert_eq!(kinds(&d.tool_name), vec!["confusable"]);
        assert!(d.marked);
        // The genuine name is not marked.
        let d = show("countersign.tool-call/1", &fields);
        assert!(kinds(&d.tool_name).is_empty() && kinds(&d.agent_id).is_empty());
        assert!(!d.marked);
    }

    #[test]
    fn amounts_get_a_grouped_reading_aid_and_keep_their_exact_text() {
        assert_eq!(
            group_digits("40000.00").as_deref(),
            Some("40\u{2009}000.00")
        );
        assert_eq!(
            group_digits("-1234567").as_deref(),
            Some("-1\u{2009}234\u{2009}567")
        );
        assert_eq!(group_digits("999.99"), None, "nothing to group");
        for not_decimal in [
            "DE89 3704",
            "1e5",
            "12.",
            ".5",
            "1,000",
            "",
            "-",
            "１２３４",
        ] {
            assert_eq!(group_digits(not_decimal), None, "{not_decimal:?}");
        }
        let fields = json!({"amount": "40000.00", "currency": "EUR",
            "source_account": "ops-main", "destination_account": "12345678", "reference": "R"});
        let d = show("countersign.payment/1", &fields);
        let amount = d.rows.iter().find(|r| r.path == "amount").unwrap();
        assert_eq!(joined(&amount.value), "40000.00", "the exact text stays");
        assert_eq!(amount.grouped.as_deref(), Some("40\u{2009}000.00"));
        // An account number that happens to be digits is not an amount.
        let account = d
            .rows
            .iter()
            .find(|r| r.path == "destination_account")
            .unwrap();
        assert_eq!(account.grouped, None);
        // In an untyped tool call: numbers, and decimal strings under an amount-like key.
        let fields = json!({"agent_id": "a", "tool_name": "t",
            "params": {"amount": "1500000", "count": 25000, "to": "12345"}});
        let d = show("countersign.tool-call/1", &fields);
        let grouped: Vec<(&str, Option<&str>)> = d
            .rows
            .iter()
            .map(|r| (r.path.as_str(), r.grouped.as_deref()))
            .collect();
        assert!(grouped.contains(&("params.amount", Some("1\u{2009}500\u{2009}000"))));
        assert!(grouped.contains(&("params.count", Some("25\u{2009}000"))));
        assert!(grouped.contains(&("params.to", None)));
    }

    #[test]
    fn code_points_nfc_changes_are_marked_in_rows_keys_and_json() {
        let fields = json!({"agent_id": "a", "tool_name": "t",
            "params": {"user": "\u{212A}evin", "\u{2126}hm": "x"}});
        let mut nfc = NfcMarks::new();
        nfc.insert("/params/user".into(), vec!['\u{212A}']);
        nfc.insert("/params/\u{2126}hm".into(), vec!['\u{2126}']);
        let d = display(&profile("countersign.tool-call/1"), &fields, REQ, &nfc);
        assert!(d.marked && d.nfc_changed);
        let user = d.rows.iter().find(|r| r.path == "params.user").unwrap();
        assert_eq!(
            joined(&user.value),
            "\u{212A}evin",
            "the submitted text is shown"
        );
        assert_eq!(kinds(&user.value), vec!["nfc"]);
        let name = &user.value[0].mark.as_ref().unwrap().name;
        assert_eq!(name, "U+212A KELVIN SIGN becomes \"K\" (U+004B) in NFC");
        assert!(user.warnings.iter().any(|w| w.contains("not in NFC")));
        let ohm = d
            .rows
            .iter()
            .find(|r| r.path == "params.\u{2126}hm")
            .unwrap();
        assert!(kinds(&ohm.label).contains(&"nfc"));
        let json_kinds: Vec<&str> = d
            .json
            .iter()
            .filter_map(|s| s.mark.as_ref().map(|m| m.kind))
            .collect();
        assert_eq!(json_kinds, vec!["nfc", "nfc"]);
        // A combining mark that composes with its neighbour is named as such.
        let m = nfc_mark('\u{0301}', &['\u{0301}']).unwrap();
        assert_eq!(m.name, "U+0301 is combined with its neighbours by NFC");
        assert_eq!(nfc_mark('a', &['\u{0301}']), None);
    }
}
