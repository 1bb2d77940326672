//! Admission: the one reading of a client frame that decides whether it may travel further
//! (docs/MCP.md, "What the interposer admits").
//!
//! The interposer judges a frame by reading it, and the upstream acts on its own reading of the
//! same bytes. Wherever the two readings can differ, an agent can show the interposer one thing
//! and have the upstream run another: a frame the interposer cannot parse but the upstream can
//! (a lone surrogate, `1e400`, nesting past a parser's limit), a line the upstream splits in two
//! (a bare CR under Python's universal newlines), or a member name the upstream matches
//! differently (Go's `encoding/json` matches struct fields case-insensitively, and readers disagree
//! on which of two duplicate members wins). So the interposer is the strictest reader on the path:
//! it admits only frames that every common reader reads as the same single message, and answers
//! everything else itself. Nothing that fails admission reaches the upstream.
//!
//! A frame is admitted when it is:
//! - one JSON text (RFC 8259) of at most [`MAX_FRAME_BYTES`], nested at most [`MAX_DEPTH`] deep;
//! - on one line: no raw CR or LF anywhere (JSON whitespace is space and tab only), and no raw
//!   U+0085, U+2028 or U+2029 inside a string (Python's `str.splitlines` splits on them);
//! - free of lone surrogates in `\u` escapes and of numbers that overflow a double;
//! - free of duplicate member names and of names that differ only in case, in every object
//!   (case is folded as Unicode simple folding does, so `K` KELVIN SIGN and `ſ` LONG S count);
//! - exactly one JSON-RPC 2.0 message: an object (no batch) with `"jsonrpc": "2.0"`; a request
//!   (string `method`, string or integer `id`), a notification (`method`, no `id`) or a response
//!   (`id` and exactly one of `result` and `error`, no `method`); `params`, when present, an
//!   object; and no member at the top level or in `params` that is a well-known member's name in
//!   another case (`Method`, `NAME`, `argumentſ`).
//!
//! [`admit`] says which rule a refused frame broke and where; [`Rejection::code`] is the JSON-RPC
//! error the client gets (`-32700` for a frame that is no JSON text under these rules, `-32600`
//! for JSON that is no single acceptable message), and [`recover_id`] finds the request id to
//! answer under when one can be read.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::ops::Range;

/// Largest frame admitted (tool arguments can be whole files); the HTTP body limit is the same.
pub const MAX_FRAME_BYTES: usize = 16 << 20;
/// Deepest nesting admitted: room for `params`, `arguments` and the 32 levels an approval profile
/// admits, and well below every common parser's own limit (serde_json: 128), so whatever is
/// admitted is read in full by every reader.
pub const MAX_DEPTH: usize = 64;

/// Members of a JSON-RPC message whose name, in another case, a case-insensitive reader would
/// take for the member itself.
const MESSAGE_MEMBERS: [&str; 6] = ["jsonrpc", "id", "method", "params", "result", "error"];
/// The same for `params`: the members the interposer reads to judge a message.
const PARAMS_MEMBERS: [&str; 11] = [
    "name",
    "arguments",
    "_meta",
    "task",
    "requestState",
    "inputResponses",
    "requestId",
    "taskId",
    "uri",
    "protocolVersion",
    "capabilities",
];

/// Why a frame was not admitted; `at` is a byte offset into the frame.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Rejection {
    #[error("the frame is {bytes} bytes; at most {max} are admitted")]
    TooLarge { bytes: usize, max: usize },
    #[error("the frame is not UTF-8 (invalid byte at {at})")]
    NotUtf8 { at: usize },
    #[error("not JSON at byte {at}: {expected}")]
    Syntax { at: usize, expected: &'static str },
    #[error("raw line break {character} at byte {at}: a frame is one line")]
    LineBreak { at: usize, character: &'static str },
    #[error("lone surrogate escape at byte {at}")]
    LoneSurrogate { at: usize },
    #[error("number at byte {at} is out of range for a double")]
    NumberOutOfRange { at: usize },
    #[error("nested deeper than {max} at byte {at}")]
    TooDeep { at: usize, max: usize },
    #[error("member {name:?} appears twice in one object (byte {at})")]
    DuplicateMember { at: usize, name: String },
    #[error("members {name:?} and {other:?} differ only in case (byte {at})")]
    CaseCollision {
        at: usize,
        name: String,
        other: String,
    },
    #[error("member {name:?} is {known:?} in another case (byte {at})")]
    CaseVariant {
        at: usize,
        name: String,
        known: &'static str,
    },
    #[error("a batch: the interposer relays one message per frame")]
    Batch,
    #[error("not a JSON-RPC message: {0}")]
    NotAMessage(&'static str),
}

impl Rejection {
    /// The JSON-RPC error code: `-32700` when the frame is no JSON text under the admission
    /// rules, `-32600` when it is JSON but no single acceptable message.
    pub fn code(&self) -> i64 {
        match self {
            Self::TooLarge { .. }
            | Self::NotUtf8 { .. }
            | Self::Syntax { .. }
            | Self::LineBreak { .. }
            | Self::LoneSurrogate { .. }
            | Self::NumberOutOfRange { .. }
            | Self::TooDeep { .. } => PARSE_ERROR,
            Self::DuplicateMember { .. }
            | Self::CaseCollision { .. }
            | Self::CaseVariant { .. }
            | Self::Batch
            | Self::NotAMessage(_) => INVALID_REQUEST,
        }
    }

    /// A short stable word for logs and the audit record.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::TooLarge { .. } => "frame_too_large",
            Self::NotUtf8 { .. } => "not_utf8",
            Self::Syntax { .. } => "not_json",
            Self::LineBreak { .. } => "line_break",
            Self::LoneSurrogate { .. } => "lone_surrogate",
            Self::NumberOutOfRange { .. } => "number_out_of_range",
            Self::TooDeep { .. } => "too_deep",
            Self::DuplicateMember { .. } => "duplicate_member",
            Self::CaseCollision { .. } => "case_collision",
            Self::CaseVariant { .. } => "case_variant",
            Self::Batch => "batch",
            Self::NotAMessage(_) => "not_a_message",
        }
    }
}

/// JSON-RPC "Parse error".
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC "Invalid Request".
pub const INVALID_REQUEST: i64 = -32600;

/// What kind of JSON-RPC message an admitted frame is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Request,
    Notification,
    Response,
}

/// An admitted frame: its kind and where its top-level members are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub kind: Kind,
    /// The method (decoded), for requests and notifications.
    pub method: Option<String>,
    /// The byte range of the `id` value.
    pub id: Option<Range<usize>>,
    /// The byte range of the `params` object.
    pub params: Option<Range<usize>>,
}

/// Admit `frame` (one line, its line break already taken off) or say why not.
pub fn admit(frame: &str) -> Result<Message, Rejection> {
    if frame.len() > MAX_FRAME_BYTES {
        return Err(Rejection::TooLarge {
            bytes: frame.len(),
            max: MAX_FRAME_BYTES,
        });
    }
    let mut r = Reader {
        text: frame,
        at: 0,
        top: Vec::new(),
    };
    r.whitespace()?;
    match r.peek() {
        Some(b'{') => {}
        Some(b'[') => {
            // Read in full first: a batch that is no JSON at all is a parse error.
            r.value(1)?;
            r.end()?;
            return Err(Rejection::Batch);
        }
        _ => {
            r.value(1)?;
            r.end()?;
            return Err(Rejection::NotAMessage("not an object"));
        }
    }
    r.object(1, Keep::Top)?;
    r.end()?;
    message(frame, r.top)
}

/// Admit a frame given as bytes (a stdio line): UTF-8 first.
pub fn admit_bytes(frame: &[u8]) -> Result<(&str, Message), Rejection> {
    if frame.len() > MAX_FRAME_BYTES {
        return Err(Rejection::TooLarge {
            bytes: frame.len(),
            max: MAX_FRAME_BYTES,
        });
    }
    let text = std::str::from_utf8(frame).map_err(|e| Rejection::NotUtf8 {
        at: e.valid_up_to(),
    })?;
    Ok((text, admit(text)?))
}

/// The JSON-RPC shape of an admitted JSON object, from its top-level members.
fn message(text: &str, top: Vec<Member>) -> Result<Message, Rejection> {
    let get = |name: &str| top.iter().find(|m| m.name == name);
    let raw = |m: &Member| &text[m.value.clone()];
    if get("jsonrpc").map(raw) != Some("\"2.0\"") {
        return Err(Rejection::NotAMessage(r#""jsonrpc" must be "2.0""#));
    }
    let method = match get("method") {
        Some(m) => Some(
            m.string
                .clone()
                .ok_or(Rejection::NotAMessage("method must be a string"))?,
        ),
        None => None,
    };
    let id = get("id").map(|m| m.value.clone());
    if let Some(range) = &id
        && !is_request_id(&text[range.clone()])
    {
        return Err(Rejection::NotAMessage(
            "id must be a string or an integer (MCP: never null)",
        ));
    }
    let params = get("params").map(|m| m.value.clone());
    if params
        .as_ref()
        .is_some_and(|p| !text[p.clone()].starts_with('{'))
    {
        return Err(Rejection::NotAMessage("params must be an object"));
    }
    let (result, error) = (get("result").is_some(), get("error").is_some());
    let kind = match (&method, &id, result, error) {
        (Some(_), Some(_), false, false) => Kind::Request,
        (Some(_), None, false, false) => Kind::Notification,
        (None, Some(_), true, false) | (None, Some(_), false, true) => {
            if params.is_some() {
                return Err(Rejection::NotAMessage("a response carries no params"));
            }
            Kind::Response
        }
        (Some(_), _, _, _) => {
            return Err(Rejection::NotAMessage(
                "a request carries no result or error",
            ));
        }
        (None, None, _, _) => return Err(Rejection::NotAMessage("neither method nor id")),
        (None, Some(_), _, _) => {
            return Err(Rejection::NotAMessage(
                "a response has exactly one of result and error",
            ));
        }
    };
    Ok(Message {
        kind,
        method,
        id,
        params,
    })
}

/// A JSON-RPC id MCP accepts, as admitted text: a string, or an integer a 64-bit reader holds
/// exactly (no fraction, no exponent, no `-0`).
fn is_request_id(raw: &str) -> bool {
    if raw.starts_with('"') {
        return true;
    }
    let digits = raw.strip_prefix('-').unwrap_or(raw);
    !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && raw != "-0"
        && (raw.parse::<i64>().is_ok() || raw.parse::<u64>().is_ok())
}

/// Which members of an object the reader keeps.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Keep {
    /// The message itself: its members, and `params` is read as [`Keep::Params`].
    Top,
    /// `params`: checked against [`PARAMS_MEMBERS`].
    Params,
    /// Anything deeper.
    Nothing,
}

/// A top-level member: its decoded name, its value's range, and its decoded value if a string.
struct Member {
    name: String,
    value: Range<usize>,
    string: Option<String>,
}

struct Reader<'a> {
    text: &'a str,
    at: usize,
    top: Vec<Member>,
}

impl Reader<'_> {
    fn bytes(&self) -> &[u8] {
        self.text.as_bytes()
    }

    /// What is left to read.
    fn rest(&self) -> &[u8] {
        self.bytes().get(self.at..).unwrap_or_default()
    }

    fn peek(&self) -> Option<u8> {
        self.bytes().get(self.at).copied()
    }

    fn syntax(&self, expected: &'static str) -> Rejection {
        Rejection::Syntax {
            at: self.at,
            expected,
        }
    }

    /// Spaces and tabs only: a CR or LF is a line break, which no frame may carry.
    fn whitespace(&mut self) -> Result<(), Rejection> {
        while let Some(b) = self.peek() {
            match b {
                b' ' | b'\t' => self.at += 1,
                b'\r' => return Err(line_break(self.at, "CR")),
                b'\n' => return Err(line_break(self.at, "LF")),
                _ => break,
            }
        }
        Ok(())
    }

    fn expect(&mut self, byte: u8, expected: &'static str) -> Result<(), Rejection> {
        if self.peek() != Some(byte) {
            return Err(self.syntax(expected));
        }
        self.at += 1;
        Ok(())
    }

    /// Nothing but whitespace after the value.
    fn end(&mut self) -> Result<(), Rejection> {
        self.whitespace()?;
        if self.at != self.text.len() {
            return Err(self.syntax("the end of the frame (one JSON text per frame)"));
        }
        Ok(())
    }

    fn value(&mut self, depth: usize) -> Result<(), Rejection> {
        self.whitespace()?;
        match self.peek() {
            Some(b'{') => self.object(depth, Keep::Nothing),
            Some(b'[') => self.array(depth),
            Some(b'"') => self.string(false).map(drop),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(b't') => self.literal("true"),
            Some(b'f') => self.literal("false"),
            Some(b'n') => self.literal("null"),
            _ => Err(self.syntax("a value")),
        }
    }

    fn literal(&mut self, word: &'static str) -> Result<(), Rejection> {
        if !self.rest().starts_with(word.as_bytes()) {
            return Err(self.syntax("true, false or null"));
        }
        self.at += word.len();
        Ok(())
    }

    fn deeper(&self, depth: usize) -> Result<usize, Rejection> {
        if depth > MAX_DEPTH {
            return Err(Rejection::TooDeep {
                at: self.at,
                max: MAX_DEPTH,
            });
        }
        Ok(depth + 1)
    }

    fn object(&mut self, depth: usize, keep: Keep) -> Result<(), Rejection> {
        let inner = self.deeper(depth)?;
        self.expect(b'{', "{")?;
        let mut names = Names::default();
        self.whitespace()?;
        if self.peek() == Some(b'}') {
            self.at += 1;
            return Ok(());
        }
        loop {
            self.whitespace()?;
            let name_at = self.at;
            if self.peek() != Some(b'"') {
                return Err(self.syntax("a member name"));
            }
            let name = self.string(true)?.unwrap_or_default();
            names.add(&name, name_at)?;
            if let Some(known) = case_variant(&name, keep) {
                return Err(Rejection::CaseVariant {
                    at: name_at,
                    name,
                    known,
                });
            }
            self.whitespace()?;
            self.expect(b':', ":")?;
            self.whitespace()?;
            let start = self.at;
            let mut string = None;
            match (keep, name.as_str(), self.peek()) {
                (Keep::Top, "params", Some(b'{')) => self.object(inner, Keep::Params)?,
                (Keep::Top, _, Some(b'"')) => string = self.string(true)?,
                _ => self.value(inner)?,
            }
            if keep == Keep::Top {
                self.top.push(Member {
                    name,
                    value: start..self.at,
                    string,
                });
            }
            self.whitespace()?;
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b'}') => {
                    self.at += 1;
                    return Ok(());
                }
                _ => return Err(self.syntax(", or }")),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<(), Rejection> {
        let inner = self.deeper(depth)?;
        self.expect(b'[', "[")?;
        self.whitespace()?;
        if self.peek() == Some(b']') {
            self.at += 1;
            return Ok(());
        }
        loop {
            self.value(inner)?;
            self.whitespace()?;
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b']') => {
                    self.at += 1;
                    return Ok(());
                }
                _ => return Err(self.syntax(", or ]")),
            }
        }
    }

    /// A string; its decoded text when `decode`.
    fn string(&mut self, decode: bool) -> Result<Option<String>, Rejection> {
        self.expect(b'"', "\"")?;
        let mut out = decode.then(String::new);
        loop {
            let start = self.at;
            // The plain run up to the next quote, backslash or byte that needs a look.
            let run = self
                .rest()
                .iter()
                .position(|b| needs_a_look(*b))
                .unwrap_or(self.rest().len());
            self.at += run;
            if let Some(out) = &mut out {
                out.push_str(&self.text[start..self.at]);
            }
            let Some(b) = self.peek() else {
                return Err(self.syntax("the end of the string"));
            };
            match b {
                b'"' => {
                    self.at += 1;
                    return Ok(out);
                }
                b'\\' => {
                    let c = self.escape()?;
                    if let Some(out) = &mut out {
                        out.push(c);
                    }
                }
                b'\r' => return Err(line_break(self.at, "CR")),
                b'\n' => return Err(line_break(self.at, "LF")),
                0x00..=0x1F => return Err(self.syntax("no raw control character in a string")),
                _ => {
                    // A lead byte of U+0085 (C2 85) or U+2028/2029 (E2 80 A8/A9): line
                    // separators for Python's `splitlines`; any other character passes.
                    let rest = self.rest();
                    let name = match rest {
                        [0xC2, 0x85, ..] => Some("U+0085"),
                        [0xE2, 0x80, 0xA8, ..] => Some("U+2028"),
                        [0xE2, 0x80, 0xA9, ..] => Some("U+2029"),
                        _ => None,
                    };
                    if let Some(name) = name {
                        return Err(line_break(self.at, name));
                    }
                    let c = self.text[self.at..].chars().next().unwrap_or_default();
                    self.at += c.len_utf8().max(1);
                    if let Some(out) = &mut out {
                        out.push(c);
                    }
                }
            }
        }
    }

    /// One escape sequence (at its backslash); surrogates must come in pairs.
    fn escape(&mut self) -> Result<char, Rejection> {
        let at = self.at;
        self.at += 1;
        let Some(b) = self.peek() else {
            return Err(self.syntax("an escape"));
        };
        self.at += 1;
        let c = match b {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let unit = self.hex4()?;
                match unit {
                    0xD800..=0xDBFF => {
                        if !self.rest().starts_with(b"\\u") {
                            return Err(Rejection::LoneSurrogate { at });
                        }
                        self.at += 2;
                        let low = self.hex4()?;
                        if !(0xDC00..=0xDFFF).contains(&low) {
                            return Err(Rejection::LoneSurrogate { at });
                        }
                        let code = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
                        char::from_u32(code).ok_or(Rejection::LoneSurrogate { at })?
                    }
                    0xDC00..=0xDFFF => return Err(Rejection::LoneSurrogate { at }),
                    _ => char::from_u32(unit).ok_or(Rejection::LoneSurrogate { at })?,
                }
            }
            _ => {
                self.at = at;
                return Err(self.syntax("a valid escape"));
            }
        };
        Ok(c)
    }

    fn hex4(&mut self) -> Result<u32, Rejection> {
        let digits = self
            .bytes()
            .get(self.at..self.at + 4)
            .ok_or_else(|| self.syntax("four hex digits"))?;
        let mut v = 0u32;
        for &d in digits {
            let n = (d as char)
                .to_digit(16)
                .ok_or_else(|| self.syntax("four hex digits"))?;
            v = v * 16 + n;
        }
        self.at += 4;
        Ok(v)
    }

    fn digits(&mut self) -> usize {
        let start = self.at;
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.at += 1;
        }
        self.at - start
    }

    /// RFC 8259's number, and one a double holds (a reader that turns `1e400` into infinity
    /// and one that refuses it would not agree on the message).
    fn number(&mut self) -> Result<(), Rejection> {
        let start = self.at;
        if self.peek() == Some(b'-') {
            self.at += 1;
        }
        match self.peek() {
            Some(b'0') => self.at += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return Err(self.syntax("a digit")),
        }
        if self.peek() == Some(b'.') {
            self.at += 1;
            if self.digits() == 0 {
                return Err(self.syntax("a digit after the decimal point"));
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.at += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.at += 1;
            }
            if self.digits() == 0 {
                return Err(self.syntax("a digit in the exponent"));
            }
        }
        let text = &self.text[start..self.at];
        match text.parse::<f64>() {
            Ok(v) if v.is_finite() => Ok(()),
            _ => Err(Rejection::NumberOutOfRange { at: start }),
        }
    }
}

/// The bytes a string's plain run stops at: its end, an escape, a control character, and the lead
/// bytes of U+0085 (C2) and U+2028/U+2029 (E2). A table: the run is most of a frame's bytes.
#[allow(
    clippy::indexing_slicing,
    reason = "evaluated at compile time: an index out of bounds would not compile"
)]
const NEEDS_A_LOOK: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 0x20 {
        table[b] = true;
        b += 1;
    }
    table[b'"' as usize] = true;
    table[b'\\' as usize] = true;
    table[0xC2] = true;
    table[0xE2] = true;
    table
};

fn needs_a_look(b: u8) -> bool {
    NEEDS_A_LOOK.get(usize::from(b)).copied().unwrap_or(true)
}

fn line_break(at: usize, character: &'static str) -> Rejection {
    Rejection::LineBreak { at, character }
}

/// The member names of one object, to refuse duplicates and names equal but for case: by folded
/// name, the name as written (a map, so an object with many members costs linear time).
#[derive(Default)]
struct Names {
    seen: HashMap<String, String>,
}

impl Names {
    fn add(&mut self, name: &str, at: usize) -> Result<(), Rejection> {
        match self.seen.entry(fold(name)) {
            Entry::Vacant(v) => {
                v.insert(name.to_owned());
                Ok(())
            }
            Entry::Occupied(o) if o.get() == name => Err(Rejection::DuplicateMember {
                at,
                name: name.to_owned(),
            }),
            Entry::Occupied(o) => Err(Rejection::CaseCollision {
                at,
                name: name.to_owned(),
                other: o.get().clone(),
            }),
        }
    }
}

/// `name` with case folded: upper then lower, so every letter that has a case form another
/// reader maps onto ASCII (KELVIN SIGN, LONG S) lands on the same text.
fn fold(name: &str) -> String {
    if name.is_ascii() {
        return name.to_ascii_lowercase();
    }
    name.chars()
        .flat_map(char::to_uppercase)
        .flat_map(char::to_lowercase)
        .collect()
}

/// The well-known member `name` spells in another case, where the reader judges that object.
fn case_variant(name: &str, keep: Keep) -> Option<&'static str> {
    let known: &[&'static str] = match keep {
        Keep::Top => &MESSAGE_MEMBERS,
        Keep::Params => &PARAMS_MEMBERS,
        Keep::Nothing => return None,
    };
    // Every known name is ASCII: an ASCII name compares without folding; another folds once.
    if name.is_ascii() {
        return known
            .iter()
            .find(|k| **k != name && k.eq_ignore_ascii_case(name))
            .copied();
    }
    let folded = fold(name);
    known.iter().find(|k| **k == folded).copied()
}

/// The request id of a frame that was not admitted, if it can be read: the value of a top-level
/// `id` member that is a string or an integer, found by skipping over every other member however
/// malformed its insides. `None` when no such id can be told apart with certainty.
pub fn recover_id(frame: &[u8]) -> Option<serde_json::Value> {
    let text = std::str::from_utf8(frame).ok()?;
    let mut at = skip_space(text, 0);
    if text.as_bytes().get(at) != Some(&b'{') {
        return None;
    }
    at += 1;
    let mut found = None;
    loop {
        at = skip_space(text, at);
        let key_end = skip_string(text, at)?;
        let key: String = serde_json::from_str(&text[at..key_end]).ok()?;
        at = skip_space(text, key_end);
        if text.as_bytes().get(at) != Some(&b':') {
            return None;
        }
        at = skip_space(text, at + 1);
        let end = skip_value(text, at)?;
        if key == "id" {
            if found.is_some() {
                return None; // two ids: none can be trusted
            }
            let raw = &text[at..end];
            if !is_request_id(raw) {
                return None;
            }
            found = Some(serde_json::from_str::<serde_json::Value>(raw).ok()?);
        }
        at = skip_space(text, end);
        match text.as_bytes().get(at) {
            Some(b',') => at += 1,
            Some(b'}') => return found,
            // An object that does not close: a later `id` may hide in what cannot be read.
            _ => return None,
        }
    }
}

fn skip_space(text: &str, mut at: usize) -> usize {
    while matches!(text.as_bytes().get(at), Some(b' ' | b'\t' | b'\r' | b'\n')) {
        at += 1;
    }
    at
}

/// The end of the string starting at `at` (escapes skipped, not checked).
fn skip_string(text: &str, at: usize) -> Option<usize> {
    let b = text.as_bytes();
    if b.get(at) != Some(&b'"') {
        return None;
    }
    let mut i = at + 1;
    loop {
        match b.get(i)? {
            b'"' => return Some(i + 1),
            b'\\' => i += 2,
            _ => i += 1,
        }
    }
}

/// The end of the value starting at `at`: a string, a container (brackets counted without
/// recursion, strings skipped) or a scalar (up to the next delimiter). Its insides are not checked.
fn skip_value(text: &str, at: usize) -> Option<usize> {
    let b = text.as_bytes();
    match b.get(at)? {
        b'"' => skip_string(text, at),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = at;
            loop {
                match b.get(i)? {
                    b'"' => {
                        i = skip_string(text, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth = depth.checked_sub(1)?;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
        }
        _ => {
            let end = b
                .get(at..)?
                .iter()
                .position(|c| matches!(c, b',' | b'}' | b']' | b' ' | b'\t' | b'\r' | b'\n'))
                .map_or(b.len(), |n| at + n);
            (end > at).then_some(end)
        }
    }
}

#[cfg(test)]
mod tests;
