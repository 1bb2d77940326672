//! The `path` rule's reading of a file path: whether the path an agent passes stays inside a
//! directory the scope names.
//!
//! A string prefix is the wrong test for a path: `/srv/data/../../etc/shadow` starts with
//! `/srv/data/` and names `/etc/shadow`, and `/srv/data2/x` starts with `/srv/data`. So the rule
//! reads the argument as an absolute POSIX path, splits it into names and compares whole names.
//! Where two readers of one path could disagree — the kernel, a tool that percent-decodes, a tool
//! that takes `\` for a separator — the argument is refused rather than read one way:
//!
//! | in the argument | read as |
//! |---|---|
//! | `/` repeated inside (`/a//b`) | one separator, as POSIX reads it |
//! | a trailing `/` | nothing: `/a/b/` is `/a/b` |
//! | a `.` name | nothing: it names the directory it is in |
//! | a `..` name, anywhere | refused, even where it would stay inside (below) |
//! | a leading `//` | refused: POSIX leaves its meaning to the implementation |
//! | a relative path | refused: relative to a directory the verifier does not know |
//! | `\` | refused: a separator on Windows, a name character on POSIX |
//! | `%` | refused: a tool that percent-decodes reads `%2e%2e` as `..` |
//! | a control character, NUL included | refused: NUL ends the path for C and the kernel |
//! | more than [`MAX_FILE_PATH_BYTES`] bytes | refused: longer than Linux's `PATH_MAX` |
//!
//! Why every `..` and not only one that climbs out: the kernel resolves `..` after following a
//! symbolic link, so `/srv/data/self/../x`, lexically `/srv/data/x`, is `/srv/x` when `self` is a
//! link to `.` — a link that points inside the directory is enough to escape it. No lexical rule
//! can undo that; refusing `..` keeps what this rule admits equal to what its names say.
//!
//! Names compare code point by code point: no case folding, no Unicode normalization. A call that
//! spells a name in another case is refused, which on a case-insensitive file system is the safe
//! side. What the rule cannot see: a symbolic link under the directory that points elsewhere.
//! That is the host's to prevent (docs/THREAT-MODEL.md §10).
//!
//! [`NormalPath`] is a path read this way; [`PathUnder`] is a rule's directory, which must be
//! written in its normal form; docs/SPEC.md §14.4 is the normative text.

use super::error::ScopeError;
use super::excerpt_path;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The longest path accepted, in bytes (Linux's `PATH_MAX`).
pub const MAX_FILE_PATH_BYTES: usize = 4096;

/// Why a text is not read as a path. Each variant names the one thing refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PathRefusal {
    /// The path does not start with `/`.
    #[error("is not absolute (it must start with '/')")]
    NotAbsolute,
    /// The path starts with `//`, whose meaning POSIX leaves to the implementation.
    #[error("starts with '//', which POSIX leaves to the implementation")]
    LeadingDoubleSlash,
    /// A `..` name.
    #[error("has a '..' name (refused anywhere: the kernel resolves it after symbolic links)")]
    ParentName,
    /// A backslash.
    #[error("contains '\\' (a separator on Windows, a name character on POSIX)")]
    Backslash,
    /// A percent sign.
    #[error("contains '%' (a tool that percent-decodes would read another path)")]
    PercentSign,
    /// A control character.
    #[error("contains control character U+{code_point:04X}")]
    ControlChar {
        /// The control character.
        code_point: u32,
    },
    /// Longer than [`MAX_FILE_PATH_BYTES`].
    #[error("is {got} bytes, over the {MAX_FILE_PATH_BYTES}-byte cap")]
    TooLong {
        /// The length, in bytes.
        got: usize,
    },
}

/// An absolute path reduced to its names: no empty, `.` or `..` name. `/` is the empty list.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct NormalPath {
    names: Vec<String>,
}

impl NormalPath {
    /// Read `text` as an absolute path under the rules of the module's table.
    pub fn parse(text: &str) -> Result<Self, PathRefusal> {
        if text.len() > MAX_FILE_PATH_BYTES {
            return Err(PathRefusal::TooLong { got: text.len() });
        }
        if let Some(c) = text.chars().find(|c| c.is_control()) {
            return Err(PathRefusal::ControlChar {
                code_point: u32::from(c),
            });
        }
        if text.contains('\\') {
            return Err(PathRefusal::Backslash);
        }
        if text.contains('%') {
            return Err(PathRefusal::PercentSign);
        }
        let Some(rest) = text.strip_prefix('/') else {
            return Err(PathRefusal::NotAbsolute);
        };
        if rest.starts_with('/') {
            return Err(PathRefusal::LeadingDoubleSlash);
        }
        let mut names = Vec::new();
        for name in rest.split('/') {
            match name {
                "" | "." => {}
                ".." => return Err(PathRefusal::ParentName),
                _ => names.push(name.to_owned()),
            }
        }
        Ok(Self { names })
    }

    /// The names, root first.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Whether `self` is `dir` or inside it: `dir`'s names are the first names of `self`. Whole
    /// names compare, so `/srv/data2` is not inside `/srv/data`.
    pub fn is_within(&self, dir: &NormalPath) -> bool {
        self.names.starts_with(&dir.names)
    }
}

/// The normal form: `/` then the names joined by `/`; `/` alone for the root.
impl fmt::Display for NormalPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.names.is_empty() {
            return f.write_str("/");
        }
        for name in &self.names {
            write!(f, "/{name}")?;
        }
        Ok(())
    }
}

/// The directory of a `path` rule: an absolute path written in its normal form (no `.`, `..` or
/// empty name, no trailing `/` but for `/` itself), so the text signed is the directory compared.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct PathUnder {
    text: String,
    path: NormalPath,
}

impl PathUnder {
    /// Validate a directory: readable as a path, and already in its normal form.
    pub fn new(text: &str) -> Result<Self, ScopeError> {
        let path = NormalPath::parse(text).map_err(|why| ScopeError::BadPathUnder {
            under: excerpt_path(text),
            why,
        })?;
        let normal = path.to_string();
        if normal != text {
            return Err(ScopeError::PathUnderNotNormal {
                under: excerpt_path(text),
                normal: excerpt_path(&normal),
            });
        }
        Ok(Self { text: normal, path })
    }

    /// The directory as written (its normal form).
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The directory, read.
    pub fn path(&self) -> &NormalPath {
        &self.path
    }
}

impl TryFrom<String> for PathUnder {
    type Error = ScopeError;
    fn try_from(text: String) -> Result<Self, Self::Error> {
        Self::new(&text)
    }
}

impl From<PathUnder> for String {
    fn from(u: PathUnder) -> Self {
        u.text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn normal(text: &str) -> Result<String, PathRefusal> {
        NormalPath::parse(text).map(|p| p.to_string())
    }

    #[test]
    fn separators_dots_and_trailing_slashes_are_read_as_posix_does() {
        for (text, expected) in [
            ("/", "/"),
            ("/srv/data", "/srv/data"),
            ("/srv/data/", "/srv/data"),
            ("/srv//data///x", "/srv/data/x"),
            ("/srv/./data/.", "/srv/data"),
            ("/./", "/"),
            ("/srv/data/...", "/srv/data/..."),
            ("/srv/data/..x/x..", "/srv/data/..x/x.."),
            ("/srv/dätä/ファイル", "/srv/dätä/ファイル"),
        ] {
            assert_eq!(normal(text), Ok(expected.to_owned()), "{text}");
        }
    }

    #[test]
    fn ambiguous_spellings_are_refused_not_guessed() {
        for (text, refusal) in [
            ("/srv/data/../../etc/shadow", PathRefusal::ParentName),
            ("/srv/data/a/../b", PathRefusal::ParentName),
            ("/..", PathRefusal::ParentName),
            ("/srv/data/..", PathRefusal::ParentName),
            ("srv/data/x", PathRefusal::NotAbsolute),
            ("", PathRefusal::NotAbsolute),
            ("./srv", PathRefusal::NotAbsolute),
            ("//srv/data", PathRefusal::LeadingDoubleSlash),
            ("/srv/data\\..\\..\\etc", PathRefusal::Backslash),
            ("/srv/data/%2e%2e/etc", PathRefusal::PercentSign),
            ("/srv/data/100%", PathRefusal::PercentSign),
            (
                "/srv/data/x\0.txt",
                PathRefusal::ControlChar { code_point: 0 },
            ),
            (
                "/srv/data/x\n",
                PathRefusal::ControlChar { code_point: 0x0A },
            ),
            (
                "/srv/data/\u{85}",
                PathRefusal::ControlChar { code_point: 0x85 },
            ),
        ] {
            assert_eq!(normal(text), Err(refusal), "{text:?}");
        }
        let long = format!("/{}", "a".repeat(MAX_FILE_PATH_BYTES));
        assert_eq!(
            normal(&long),
            Err(PathRefusal::TooLong {
                got: MAX_FILE_PATH_BYTES + 1
            })
        );
        assert!(normal(&long[..MAX_FILE_PATH_BYTES]).is_ok());
    }

    #[test]
    fn within_compares_whole_names() {
        let p = |t: &str| NormalPath::parse(t).unwrap_or_else(|e| panic!("{t}: {e}"));
        let data = p("/srv/data");
        assert!(p("/srv/data").is_within(&data), "the directory itself");
        assert!(p("/srv/data/").is_within(&data));
        assert!(p("/srv/data/q3/report.pdf").is_within(&data));
        assert!(p("/srv//data/./x").is_within(&data));
        assert!(!p("/srv/data2").is_within(&data));
        assert!(!p("/srv/data2/x").is_within(&data));
        assert!(!p("/srv/dat").is_within(&data));
        assert!(!p("/srv").is_within(&data));
        assert!(!p("/SRV/data/x").is_within(&data), "no case folding");
        assert!(p("/anything").is_within(&p("/")));
    }

    /// Names drawn to collide with what the rule handles: dots, separators, encodings, NUL.
    fn piece() -> impl Strategy<Value = &'static str> {
        prop::sample::select(vec![
            "srv", "data", "data2", "etc", "shadow", ".", "..", "...", "", "/", "//", "\\", "%2e",
            "%", "\0", "x.y", "é",
        ])
    }

    fn path_text() -> impl Strategy<Value = String> {
        (
            prop::bool::weighted(0.9),
            prop::collection::vec(piece(), 0..10),
        )
            .prop_map(|(absolute, pieces)| {
                let body = pieces.join("/");
                if absolute { format!("/{body}") } else { body }
            })
    }

    proptest! {
        #[test]
        fn normalizing_twice_changes_nothing(text in path_text()) {
            if let Ok(once) = normal(&text) {
                prop_assert_eq!(normal(&once), Ok(once.clone()));
            }
        }

        #[test]
        fn an_accepted_path_has_no_parent_name_and_stays_under_its_directory(
            text in path_text(),
            dir in prop::sample::select(vec!["/", "/srv", "/srv/data", "/etc"]),
        ) {
            let dir = NormalPath::parse(dir).unwrap_or_else(|e| panic!("{e}"));
            if let Ok(path) = NormalPath::parse(&text) {
                // No `..` survives, so the names a reader resolves are the names compared.
                prop_assert!(!text.split('/').any(|name| name == ".."));
                prop_assert!(path.names().iter().all(|n| !n.is_empty() && n != "." && n != ".."));
                prop_assert!(path.names().iter().all(|n| !n.contains(['\\', '%', '\0'])));
                // Within means the directory's names, whole, come first: a reader that walks the
                // names from the root passes through the directory.
                if path.is_within(&dir) {
                    let (path, dir) = (path.to_string(), dir.to_string());
                    let below = format!("{}/", dir.trim_end_matches('/'));
                    prop_assert!(path == dir || path.starts_with(&below), "{} in {}", path, dir);
                }
            }
        }

        #[test]
        fn parsing_any_text_refuses_or_reads_without_panicking(text in ".{0,64}") {
            let _ = NormalPath::parse(&text);
        }
    }
}
