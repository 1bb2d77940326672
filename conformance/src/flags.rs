//! The closed flag registry: `vectors/README.md`, section "Flags", one table row per flag.

use std::collections::BTreeMap;

/// Flags documented in the README text, with their meaning.
///
/// A row looks like ``| `flag-name` | meaning |``; only rows inside the `## Flags` section count.
pub fn documented(readme: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut inside = false;
    for line in readme.lines() {
        if line.starts_with("## ") {
            inside = line.trim() == "## Flags";
            continue;
        }
        if !inside {
            continue;
        }
        let Some(rest) = line.strip_prefix("| `") else {
            continue;
        };
        let Some((flag, rest)) = rest.split_once('`') else {
            continue;
        };
        let meaning = rest
            .trim()
            .trim_start_matches('|')
            .trim()
            .trim_end_matches('|')
            .trim();
        out.insert(flag.to_owned(), meaning.to_owned());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_only_the_flags_section() {
        let text = "# x\n| `not-a-flag` | no |\n## Flags\n| flag | meaning |\n|---|---|\n| `a-b` | one thing |\n| `c` | other |\n## Next\n| `d` | no |\n";
        let flags = documented(text);
        assert_eq!(flags.keys().collect::<Vec<_>>(), ["a-b", "c"]);
        assert_eq!(flags["a-b"], "one thing");
    }
}
