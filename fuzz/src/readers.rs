//! Lenient models of how real MCP servers read the lines the interposer forwards: the oracle of
//! the `mcp_relay` target.
//!
//! The interposer judges a frame under one reading; the upstream acts on its own. Each model
//! below is at least as lenient as one real reader on the point it models, so a `tools/call` any
//! of them finds in what was forwarded is one some server could execute:
//!
//! - framing: the line as is (TypeScript SDK: split on "\n" only); the line split on CR, LF and
//!   CRLF (Python SDK: a text stream with universal newlines); the line split on every line
//!   boundary `str.splitlines` knows (VT, FF, FS, GS, RS, NEL, U+2028, U+2029 too); and the
//!   whole stream read as consecutive JSON values, each followed by CR or LF, resynchronising
//!   after the next LF on an error (Go SDK: one `json.Decoder` over stdin);
//! - member names: exact, or folded as Go's `encoding/json` folds them (ASCII case, and U+017F
//!   long s for "s", U+212A Kelvin sign for "k");
//! - duplicate members: the first or the last one wins;
//! - strings: lone surrogate escapes read as U+FFFD (Go) rather than refused; raw control
//!   characters refused, as all three refuse them;
//! - numbers: any size (`1e400` is infinity in JavaScript and Python, a raw number in Go);
//! - nesting: up to 10,000 levels (Go's limit; Python's and JavaScript's readers take less);
//! - a `tools/call` without an id (a notification) counts as a call; a JSON array is a batch.

/// Deepest nesting the models read (Go's `encoding/json` limit).
const MAX_DEPTH: usize = 10_000;
/// Levels kept as a tree (batch, message, params, name); deeper values are only checked.
const TREE_DEPTH: usize = 4;

#[derive(Debug)]
enum Node {
    Object(Vec<(String, Node)>),
    Array(Vec<Node>),
    Str(String),
    Other,
}

#[derive(Clone, Copy)]
enum Names {
    Exact,
    GoFold,
}

#[derive(Clone, Copy)]
enum Duplicates {
    First,
    Last,
}

/// A tools/call some model reads in `lines` (what the upstream was sent) whose tool is not
/// `allowed`: the name and the text it was read from.
pub(crate) fn unallowed_call(lines: &[String], allowed: &str) -> Option<(String, String)> {
    let mut texts: Vec<&str> = Vec::new();
    for line in lines {
        texts.push(line);
        texts.extend(line.split(['\r', '\n']));
        texts.extend(line.split(is_any_line_break));
    }
    let stream = lines.join("\n") + "\n";
    let mut values: Vec<(Node, &str)> = texts
        .into_iter()
        .filter_map(|t| whole_value(t).map(|n| (n, t)))
        .collect();
    values.extend(stream_values(&stream));
    for (node, text) in &values {
        for names in [Names::Exact, Names::GoFold] {
            for dups in [Duplicates::First, Duplicates::Last] {
                for tool in calls(node, names, dups) {
                    if tool != allowed {
                        return Some((tool, (*text).to_owned()));
                    }
                }
            }
        }
    }
    None
}

/// Every line boundary of Python's `str.splitlines`.
fn is_any_line_break(c: char) -> bool {
    matches!(
        c,
        '\n' | '\r'
            | '\x0b'
            | '\x0c'
            | '\x1c'
            | '\x1d'
            | '\x1e'
            | '\u{85}'
            | '\u{2028}'
            | '\u{2029}'
    )
}

/// The tools called by a message or a batch of them.
fn calls(node: &Node, names: Names, dups: Duplicates) -> Vec<String> {
    match node {
        Node::Array(items) => items.iter().filter_map(|m| call(m, names, dups)).collect(),
        message => call(message, names, dups).into_iter().collect(),
    }
}

fn call(message: &Node, names: Names, dups: Duplicates) -> Option<String> {
    let Node::Str(method) = member(message, "method", names, dups)? else {
        return None;
    };
    if method != "tools/call" {
        return None;
    }
    match member(member(message, "params", names, dups)?, "name", names, dups)? {
        Node::Str(name) => Some(name.clone()),
        _ => None,
    }
}

fn member<'a>(node: &'a Node, key: &str, names: Names, dups: Duplicates) -> Option<&'a Node> {
    let Node::Object(members) = node else {
        return None;
    };
    let mut matching = members
        .iter()
        .filter(|(k, _)| same_name(k, key, names))
        .map(|(_, v)| v);
    match dups {
        Duplicates::First => matching.next(),
        Duplicates::Last => matching.next_back(),
    }
}

fn same_name(member: &str, key: &str, names: Names) -> bool {
    match names {
        Names::Exact => member == key,
        Names::GoFold => {
            let fold = |c: char| match c {
                '\u{17f}' => 's',
                '\u{212a}' => 'k',
                c => c.to_ascii_lowercase(),
            };
            member.chars().map(fold).eq(key.chars().map(fold))
        }
    }
}

/// `text` as exactly one value between JSON whitespace.
fn whole_value(text: &str) -> Option<Node> {
    let bytes = text.as_bytes();
    let (node, end) = value(text, ws(bytes, 0), 1)?;
    (ws(bytes, end) == bytes.len()).then_some(node)
}

/// The stream read as consecutive values, each followed by CR or LF (or the end); after an
/// error, reading goes on after the next LF.
fn stream_values(stream: &str) -> Vec<(Node, &str)> {
    let bytes = stream.as_bytes();
    let mut out = Vec::new();
    let mut at = 0;
    loop {
        let start = ws(bytes, at);
        if start >= bytes.len() {
            return out;
        }
        match value(stream, start, 1) {
            Some((node, end)) if matches!(bytes.get(end), None | Some(b'\r' | b'\n')) => {
                out.push((node, stream.get(start..end).unwrap_or_default()));
                at = end;
            }
            _ => match bytes
                .get(start..)
                .and_then(|b| b.iter().position(|&c| c == b'\n'))
            {
                Some(n) => at = start + n + 1,
                None => return out,
            },
        }
    }
}

fn ws(b: &[u8], mut i: usize) -> usize {
    while matches!(b.get(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        i += 1;
    }
    i
}

/// One value at `i` (no leading whitespace): the node (a tree up to `TREE_DEPTH`, deeper values
/// only checked, by [`skip`]) and where it ends.
fn value(t: &str, i: usize, depth: usize) -> Option<(Node, usize)> {
    let b = t.as_bytes();
    if depth > TREE_DEPTH {
        return skip(t, i, MAX_DEPTH.saturating_sub(depth)).map(|end| (Node::Other, end));
    }
    match b.get(i)? {
        b'{' => {
            let mut members = Vec::new();
            let mut j = ws(b, i + 1);
            if b.get(j) == Some(&b'}') {
                return Some((Node::Object(members), j + 1));
            }
            loop {
                let (key, k) = string(t, j)?;
                let k = ws(b, k);
                if b.get(k) != Some(&b':') {
                    return None;
                }
                let (v, end) = value(t, ws(b, k + 1), depth + 1)?;
                members.push((key, v));
                j = ws(b, end);
                match b.get(j)? {
                    b',' => j = ws(b, j + 1),
                    b'}' => break,
                    _ => return None,
                }
            }
            Some((Node::Object(members), j + 1))
        }
        b'[' => {
            let mut items = Vec::new();
            let mut j = ws(b, i + 1);
            if b.get(j) == Some(&b']') {
                return Some((Node::Array(items), j + 1));
            }
            loop {
                let (v, end) = value(t, j, depth + 1)?;
                items.push(v);
                j = ws(b, end);
                match b.get(j)? {
                    b',' => j = ws(b, j + 1),
                    b']' => break,
                    _ => return None,
                }
            }
            Some((Node::Array(items), j + 1))
        }
        b'"' => string(t, i).map(|(s, end)| (Node::Str(s), end)),
        b't' => literal(b, i, b"true"),
        b'f' => literal(b, i, b"false"),
        b'n' => literal(b, i, b"null"),
        _ => number(b, i).map(|end| (Node::Other, end)),
    }
}

/// A value at `i` whose tree is not needed, checked and skipped without recursion (an input may
/// nest far deeper than a stack allows), with at most `room` more levels of nesting: its end.
fn skip(t: &str, i: usize, room: usize) -> Option<usize> {
    let b = t.as_bytes();
    // After a key in an object: its colon, and where the value starts.
    let member = |j: usize| -> Option<usize> {
        let k = ws(b, string(t, j)?.1);
        (b.get(k) == Some(&b':')).then(|| ws(b, k + 1))
    };
    let mut open: Vec<u8> = Vec::new();
    let mut j = i;
    loop {
        // A value starts at `j`.
        match *b.get(j)? {
            c @ (b'{' | b'[') => {
                let close = if c == b'{' { b'}' } else { b']' };
                j = ws(b, j + 1);
                if b.get(j) == Some(&close) {
                    j += 1;
                } else {
                    if open.len() >= room {
                        return None;
                    }
                    open.push(close);
                    if close == b'}' {
                        j = member(j)?;
                    }
                    continue;
                }
            }
            b'"' => j = string(t, j)?.1,
            b't' => j = literal(b, j, b"true")?.1,
            b'f' => j = literal(b, j, b"false")?.1,
            b'n' => j = literal(b, j, b"null")?.1,
            _ => j = number(b, j)?,
        }
        // A value ended at `j`: close what it ends, or go on to the next member or item.
        loop {
            let Some(&close) = open.last() else {
                return Some(j);
            };
            j = ws(b, j);
            match *b.get(j)? {
                b',' => {
                    j = ws(b, j + 1);
                    if close == b'}' {
                        j = member(j)?;
                    }
                    break;
                }
                c if c == close => {
                    open.pop();
                    j += 1;
                }
                _ => return None,
            }
        }
    }
}

fn literal(b: &[u8], i: usize, word: &[u8]) -> Option<(Node, usize)> {
    (b.get(i..i + word.len())? == word).then_some((Node::Other, i + word.len()))
}

/// A number of any size: `-? digits (. digits)? ([eE] [+-]? digits)?`.
fn number(b: &[u8], mut i: usize) -> Option<usize> {
    let digits = |b: &[u8], i: usize| {
        let n = b
            .get(i..)
            .map_or(0, |r| r.iter().take_while(|c| c.is_ascii_digit()).count());
        (n > 0).then_some(i + n)
    };
    if b.get(i) == Some(&b'-') {
        i += 1;
    }
    i = digits(b, i)?;
    if b.get(i) == Some(&b'.') {
        i = digits(b, i + 1)?;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        i = digits(b, i)?;
    }
    Some(i)
}

/// A string at `i` (its opening quote): its text, lone surrogates as U+FFFD, and its end.
fn string(t: &str, i: usize) -> Option<(String, usize)> {
    let b = t.as_bytes();
    if b.get(i) != Some(&b'"') {
        return None;
    }
    let mut units: Vec<u16> = Vec::new();
    let mut j = i + 1;
    loop {
        match *b.get(j)? {
            b'"' => return Some((String::from_utf16_lossy(&units), j + 1)),
            b'\\' => {
                let unit = match *b.get(j + 1)? {
                    b'"' => u16::from(b'"'),
                    b'\\' => u16::from(b'\\'),
                    b'/' => u16::from(b'/'),
                    b'b' => 8,
                    b'f' => 12,
                    b'n' => 10,
                    b'r' => 13,
                    b't' => 9,
                    b'u' => {
                        let hex = std::str::from_utf8(b.get(j + 2..j + 6)?).ok()?;
                        if !hex.bytes().all(|c| c.is_ascii_hexdigit()) {
                            return None;
                        }
                        j += 4;
                        u16::from_str_radix(hex, 16).ok()?
                    }
                    _ => return None,
                };
                units.push(unit);
                j += 2;
            }
            c if c < 0x20 => return None,
            _ => {
                // One character, as UTF-16 units.
                let c = t.get(j..)?.chars().next()?;
                let mut buf = [0u16; 2];
                units.extend_from_slice(c.encode_utf16(&mut buf));
                j += c.len_utf8();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HELD: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"write_file","arguments":{}}}"#;
    const ALLOWED: &str = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_file","arguments":{}}}"#;

    fn finds(lines: &[&str]) -> Option<String> {
        let lines: Vec<String> = lines.iter().map(|l| (*l).to_owned()).collect();
        unallowed_call(&lines, "read_file").map(|(tool, _)| tool)
    }

    #[test]
    fn an_allowed_call_or_other_methods_are_no_finding() {
        assert_eq!(finds(&[ALLOWED]), None);
        assert_eq!(
            finds(&[r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#]),
            None
        );
        assert_eq!(finds(&["not json", "", "[]", "{}"]), None);
    }

    #[test]
    fn a_held_call_is_found_plain_and_in_a_batch_and_as_a_notification() {
        assert_eq!(finds(&[HELD]).as_deref(), Some("write_file"));
        assert_eq!(
            finds(&[&format!("[{ALLOWED},{HELD}]")]).as_deref(),
            Some("write_file")
        );
        let notification = HELD.replace(r#""id":1,"#, "");
        assert_eq!(finds(&[&notification]).as_deref(), Some("write_file"));
    }

    #[test]
    fn a_second_frame_behind_a_carriage_return_or_a_line_separator_is_found() {
        for sep in ["\r", "\u{2028}", "\u{85}", "\x0b"] {
            let line = format!(r#"{{"jsonrpc":"2.0","id":3,"method":"ping"}}{sep}{HELD}"#);
            assert_eq!(finds(&[&line]).as_deref(), Some("write_file"), "{sep:?}");
        }
        // Behind a space, no reader splits: Go's decoder refuses the trailing data.
        let line = format!(r#"{{"jsonrpc":"2.0","id":3,"method":"ping"}} {HELD}"#);
        assert_eq!(finds(&[&line]), None);
    }

    #[test]
    fn one_value_split_over_lines_is_joined_as_a_streaming_decoder_joins_it() {
        let (head, tail) = HELD.split_at(HELD.find(r#""params""#).unwrap() + 9);
        assert_eq!(finds(&[head, tail]).as_deref(), Some("write_file"));
    }

    #[test]
    fn folded_and_duplicate_member_names_are_read_every_way() {
        let folded = r#"{"method":"tools/call","params":{"name":"read_file","Name":"write_file"}}"#;
        assert_eq!(finds(&[folded]).as_deref(), Some("write_file"));
        let long_s = r#"{"method":"tools/call","params":{"name":"read_file"},"paramſ":{"name":"write_file"}}"#;
        assert_eq!(finds(&[long_s]).as_deref(), Some("write_file"));
        let first = r#"{"method":"tools/call","params":{"name":"write_file","name":"read_file"}}"#;
        assert_eq!(finds(&[first]).as_deref(), Some("write_file"));
        // Other letters do not fold onto the member names.
        let other = r#"{"method":"tools/call","params":{"name":"read_file","nam":"write_file"}}"#;
        assert_eq!(finds(&[other]), None);
    }

    #[test]
    fn deep_nesting_lone_surrogates_and_huge_numbers_do_not_stop_the_reading() {
        let deep = format!(
            r#"{{"x":{}1{},{}"#,
            "[".repeat(500),
            "]".repeat(500),
            &HELD[1..]
        );
        assert_eq!(finds(&[&deep]).as_deref(), Some("write_file"));
        let surrogate = HELD.replace("{}}}", r#"{"s":"x\ud800"}}}"#);
        assert_eq!(finds(&[&surrogate]).as_deref(), Some("write_file"));
        let number = HELD.replace(r#""id":1"#, r#""id":1e400"#);
        assert_eq!(finds(&[&number]).as_deref(), Some("write_file"));
        let name = HELD.replace("write_file", r"write_file\ud800");
        assert_eq!(finds(&[&name]).as_deref(), Some("write_file\u{fffd}"));
    }

    #[test]
    fn nesting_is_read_without_recursion_up_to_the_limit() {
        let at = |depth: usize| {
            format!(
                r#"{{"x":{}1{},{}"#,
                "[".repeat(depth),
                "]".repeat(depth),
                &HELD[1..]
            )
        };
        // Far deeper than a test thread's stack would take recursively, below Go's limit.
        assert_eq!(finds(&[&at(9_000)]).as_deref(), Some("write_file"));
        assert_eq!(finds(&[&at(20_000)]), None);
        let objects = format!(
            r#"{{"x":{}1{},{}"#,
            r#"{"a":"#.repeat(5_000),
            "}".repeat(5_000),
            &HELD[1..]
        );
        assert_eq!(finds(&[&objects]).as_deref(), Some("write_file"));
        let unbalanced = format!(
            r#"{{"x":{}1{},{}"#,
            "[".repeat(5_000),
            "]".repeat(4_999),
            &HELD[1..]
        );
        assert_eq!(finds(&[&unbalanced]), None);
    }

    #[test]
    fn malformed_json_is_no_value() {
        for text in [
            "{",
            r#"{"a"}"#,
            r#"{"a":1,}"#,
            "[1,]",
            r#""\x""#,
            "01x",
            "tru",
            r#"{"a":1}}"#,
            "\"a\tb\"",
            "\"\u{0}\"",
        ] {
            assert!(whole_value(text).is_none(), "{text}");
        }
    }
}
