//! docs/ARCHITECTURE.md, checked.
//!
//! 1. Crates: the table "may depend on / tests may also use" is read from the document itself and
//!    every dependency between workspace crates that `cargo metadata` reports is held against it.
//!    A forbidden edge fails the test with its name and the table's reason; a workspace crate the
//!    table does not list fails too, so the page cannot fall behind the workspace.
//! 2. Files: the server's module graph has no import loop through more than two files, and
//!    nothing in the CLI imports its `main.rs`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "test code: a panic is a failed test (clippy.toml covers #[test] fns, not helpers)"
)]

use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

// ---- crates ----------------------------------------------------------------------------------

/// One row of the document's table.
#[derive(Debug)]
struct CrateRule {
    normal: BTreeSet<String>,
    tests: BTreeSet<String>,
    why: String,
}

/// The rows of the table under "## The crates": `| crate | may depend on | tests may also use |
/// why |`, crate names in backticks, `—` for none.
fn rules_from_doc(doc: &str) -> BTreeMap<String, CrateRule> {
    let start = doc
        .find("## The crates")
        .expect("docs/ARCHITECTURE.md has a section \"## The crates\"");
    let section = &doc[start..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |e| e + 3)];
    let mut rules = BTreeMap::new();
    for line in section.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.trim().trim_matches('|').split(" | ").collect();
        assert_eq!(cells.len(), 4, "a crate row has four cells: {line}");
        let names = |cell: &str| -> BTreeSet<String> {
            cell.split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_owned)
                .collect()
        };
        let krate = names(cells[0]).into_iter().next().unwrap();
        let rule = CrateRule {
            normal: names(cells[1]),
            tests: names(cells[2]),
            why: cells[3].trim().to_owned(),
        };
        assert!(rules.insert(krate.clone(), rule).is_none(), "{krate} twice");
    }
    rules
}

/// A dependency of one workspace crate on another, as `cargo metadata` reports it.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Edge {
    from: String,
    to: String,
    /// `normal`, `dev` or `build`.
    kind: String,
}

/// The workspace's crates and the dependencies among them, from `cargo metadata --no-deps`.
fn workspace_edges(metadata: &Value) -> (BTreeSet<String>, Vec<Edge>) {
    let packages = metadata["packages"].as_array().expect("packages");
    let members: BTreeSet<String> = packages
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_owned())
        .collect();
    let mut edges = Vec::new();
    for p in packages {
        for d in p["dependencies"].as_array().expect("dependencies") {
            let to = d["name"].as_str().unwrap();
            if members.contains(to) {
                edges.push(Edge {
                    from: p["name"].as_str().unwrap().to_owned(),
                    to: to.to_owned(),
                    kind: d["kind"].as_str().unwrap_or("normal").to_owned(),
                });
            }
        }
    }
    edges.sort();
    (members, edges)
}

/// Every way the workspace departs from the table, one sentence each.
fn violations(
    rules: &BTreeMap<String, CrateRule>,
    members: &BTreeSet<String>,
    edges: &[Edge],
) -> Vec<String> {
    let mut out: Vec<String> = members
        .iter()
        .filter(|m| !rules.contains_key(*m))
        .map(|m| {
            format!(
                "crate {m} is not in docs/ARCHITECTURE.md's table: add its row (what it may \
                 depend on, and why)"
            )
        })
        .collect();
    for e in edges {
        let Some(rule) = rules.get(&e.from) else {
            continue;
        };
        let allowed =
            rule.normal.contains(&e.to) || (e.kind == "dev" && rule.tests.contains(&e.to));
        if !allowed {
            let list = |set: &BTreeSet<String>| {
                if set.is_empty() {
                    "no workspace crate".to_owned()
                } else {
                    set.iter().cloned().collect::<Vec<_>>().join(", ")
                }
            };
            out.push(format!(
                "forbidden dependency {} -> {} ({}): docs/ARCHITECTURE.md allows {} to depend on \
                 {} (in tests also: {}). Why: {}",
                e.from,
                e.to,
                e.kind,
                e.from,
                list(&rule.normal),
                list(&rule.tests),
                rule.why
            ));
        }
    }
    out
}

fn doc_rules() -> BTreeMap<String, CrateRule> {
    let path = workspace_root().join("docs/ARCHITECTURE.md");
    rules_from_doc(&std::fs::read_to_string(&path).unwrap())
}

#[test]
fn workspace_crates_depend_only_on_what_the_architecture_allows() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(workspace_root())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let metadata: Value = serde_json::from_slice(&out.stdout).unwrap();
    let (members, edges) = workspace_edges(&metadata);
    let found = violations(&doc_rules(), &members, &edges);
    assert!(found.is_empty(), "\n{}\n", found.join("\n"));
}

/// A workspace of the given crates and `(from, to, kind)` dependencies, as `cargo metadata` has it.
fn metadata_of(crates: &[&str], deps: &[(&str, &str, Option<&str>)]) -> Value {
    let packages: Vec<Value> = crates
        .iter()
        .map(|name| {
            let dependencies: Vec<Value> = deps
                .iter()
                .filter(|(from, _, _)| from == name)
                .map(|(_, to, kind)| json!({"name": to, "kind": kind}))
                .collect();
            json!({"name": name, "dependencies": dependencies})
        })
        .collect();
    json!({ "packages": packages })
}

#[test]
fn an_interposer_linking_the_service_is_named_with_the_reason() {
    let crates = [
        "countersign",
        "countersign-client",
        "countersign-server",
        "countersign-mcp",
    ];
    let allowed = [
        ("countersign-client", "countersign", None),
        ("countersign-server", "countersign", None),
        ("countersign-server", "countersign-client", Some("dev")),
        ("countersign-mcp", "countersign", None),
        ("countersign-mcp", "countersign-client", None),
        ("serde", "countersign", None),
    ];
    let (members, edges) = workspace_edges(&metadata_of(&crates, &allowed));
    assert_eq!(
        violations(&doc_rules(), &members, &edges),
        Vec::<String>::new()
    );

    let mut forbidden = allowed.to_vec();
    forbidden.push(("countersign-mcp", "countersign-server", None));
    let (members, edges) = workspace_edges(&metadata_of(&crates, &forbidden));
    let found = violations(&doc_rules(), &members, &edges);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(
        found[0].starts_with(
            "forbidden dependency countersign-mcp -> countersign-server (normal): \
             docs/ARCHITECTURE.md allows countersign-mcp to depend on countersign, \
             countersign-audit, countersign-client"
        ),
        "{}",
        found[0]
    );
    assert!(
        found[0].contains("must not link the service's internals"),
        "{}",
        found[0]
    );
}

#[test]
fn a_test_only_crate_is_refused_as_a_normal_dependency_and_an_unlisted_crate_is_named() {
    let crates = [
        "countersign",
        "countersign-testkit",
        "countersign-softkey",
        "countersign-new",
    ];
    let deps = [
        ("countersign", "countersign-testkit", Some("dev")),
        ("countersign-testkit", "countersign", None),
        ("countersign-testkit", "countersign-softkey", None),
    ];
    let (members, edges) = workspace_edges(&metadata_of(&crates, &deps));
    let found = violations(&doc_rules(), &members, &edges);
    assert_eq!(
        found,
        vec![
            "crate countersign-new is not in docs/ARCHITECTURE.md's table: add its row (what it \
             may depend on, and why)"
                .to_owned()
        ]
    );

    let mut deps = deps.to_vec();
    deps.push(("countersign", "countersign-testkit", None));
    let (members, edges) = workspace_edges(&metadata_of(&crates[..3], &deps));
    let found = violations(&doc_rules(), &members, &edges);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(
        found[0].starts_with(
            "forbidden dependency countersign -> countersign-testkit (normal): \
             docs/ARCHITECTURE.md allows countersign to depend on no workspace crate"
        ),
        "{}",
        found[0]
    );
}

// ---- files -----------------------------------------------------------------------------------

/// A module's path from the crate root: `["store", "rules"]` for `store/rules.rs`.
type ModPath = Vec<String>;

/// The file-level import graph of one crate.
#[derive(Debug, Default)]
struct ModuleGraph {
    /// Each product module and its file, relative to `src/`.
    files: BTreeMap<ModPath, String>,
    /// `a -> b`: a path in `a` names an item defined in `b`.
    edges: BTreeMap<ModPath, BTreeSet<ModPath>>,
    /// One path that made each edge, for the failure message.
    why: BTreeMap<(ModPath, ModPath), String>,
}

fn module_path(rel: &str) -> ModPath {
    let mut parts: ModPath = rel
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_owned)
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

fn skip_space(s: &[u8], mut i: usize) -> usize {
    while i < s.len() && s[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

fn ident_at(s: &[u8], i: usize) -> Option<(String, usize)> {
    let end = (i..s.len()).find(|&j| !is_ident(s[j])).unwrap_or(s.len());
    (end > i).then(|| (String::from_utf8_lossy(&s[i..end]).into_owned(), end))
}

/// The paths of the use tree (or expression path) at `s[i..]`, each with the name it binds:
/// `a::{b, c::d as e}` gives `a::b` (b) and `a::c::d` (e).
fn paths_at(s: &[u8], i: usize) -> (Vec<(ModPath, String)>, usize) {
    let mut prefix = ModPath::new();
    let mut i = skip_space(s, i);
    loop {
        if s.get(i) == Some(&b'{') {
            let mut out = Vec::new();
            i += 1;
            loop {
                while i < s.len() && (s[i].is_ascii_whitespace() || s[i] == b',') {
                    i += 1;
                }
                if i >= s.len() || s[i] == b'}' {
                    return (out, i + 1);
                }
                let (inner, next) = paths_at(s, i);
                if next <= i {
                    return (out, s.len());
                }
                out.extend(inner.into_iter().map(|(p, name)| {
                    let mut full = prefix.clone();
                    full.extend(p);
                    (full, name)
                }));
                i = next;
            }
        }
        if s.get(i) == Some(&b'*') {
            prefix.push("*".to_owned());
            return (vec![(prefix, "*".to_owned())], i + 1);
        }
        let Some((name, end)) = ident_at(s, i) else {
            let bound = prefix.last().cloned().unwrap_or_default();
            return (vec![(prefix, bound)], i);
        };
        prefix.push(name.clone());
        let after = skip_space(s, end);
        if s.get(after..after + 2) == Some(b"::") {
            i = skip_space(s, after + 2);
            continue;
        }
        let mut bound = name;
        let mut end = end;
        if s.get(after..after + 3) == Some(b"as ")
            && let Some((alias, e)) = ident_at(s, skip_space(s, after + 3))
        {
            bound = alias;
            end = e;
        }
        return (vec![(prefix, bound)], end);
    }
}

/// The source with comments, `#[cfg(test)]` modules written inline and `pub use` statements
/// (facade re-exports: followed, not counted) cut out. Returns (code to scan, re-export text).
fn product_code(src: &str) -> (String, Vec<String>) {
    let code: String = src
        .lines()
        .map(|l| l.find("//").map_or(l, |c| &l[..c]))
        .collect::<Vec<_>>()
        .join("\n");
    let code = match code.find("#[cfg(test)]\nmod ") {
        Some(at) if code[at..].lines().nth(1).is_some_and(|l| l.ends_with('{')) => {
            code[..at].to_owned()
        }
        _ => code,
    };
    let mut kept = String::new();
    let mut facades = Vec::new();
    let mut rest = code.as_str();
    while let Some(at) = rest.find("pub") {
        let tail = &rest[at..];
        let after_vis = match tail[3..].trim_start().strip_prefix('(') {
            Some(v) => v.find(')').map(|e| &v[e + 1..]),
            None => Some(&tail[3..]),
        };
        let starts_word = at == 0 || !is_ident(rest.as_bytes()[at - 1]);
        match after_vis.map(str::trim_start) {
            Some(u) if starts_word && u.starts_with("use ") => {
                let end = at + tail.find(';').unwrap_or(tail.len() - 1) + 1;
                kept.push_str(&rest[..at]);
                facades.push(rest[at..end].to_owned());
                rest = &rest[end..];
            }
            _ => {
                kept.push_str(&rest[..at + 3]);
                rest = &rest[at + 3..];
            }
        }
    }
    kept.push_str(rest);
    (kept, facades)
}

impl ModuleGraph {
    /// The graph of a crate's sources (`src/`-relative path → text), leaving out modules under
    /// `skip` and the modules declared `#[cfg(test)] mod x;`.
    fn of(sources: &BTreeMap<String, String>, skip: &[&str]) -> Self {
        let skipped: Vec<ModPath> = skip
            .iter()
            .map(|s| module_path(s.trim_end_matches('/')))
            .collect();
        let mut test_mods = Vec::new();
        for (rel, src) in sources {
            for (at, _) in src.match_indices("#[cfg(test)]\nmod ") {
                let line = src[at..].lines().nth(1).unwrap_or_default();
                if let Some(name) = line.strip_prefix("mod ").and_then(|l| l.strip_suffix(';')) {
                    let mut m = module_path(rel);
                    m.push(name.to_owned());
                    test_mods.push(m);
                }
            }
        }
        let mut graph = ModuleGraph::default();
        let within = |m: &ModPath, roots: &[ModPath]| roots.iter().any(|r| m.starts_with(r));
        for rel in sources.keys() {
            let m = module_path(rel);
            if !within(&m, &skipped) && !within(&m, &test_mods) {
                graph.files.insert(m, rel.clone());
            }
        }
        let mut reexports: BTreeMap<ModPath, BTreeMap<String, ModPath>> = BTreeMap::new();
        let mut code = BTreeMap::new();
        for (m, rel) in &graph.files {
            let (kept, facades) = product_code(&sources[rel]);
            for facade in facades {
                let at = facade.find("use ").unwrap() + 4;
                for (p, name) in paths_at(facade.as_bytes(), at).0 {
                    if let Some(abs) = graph.absolute(m, &p) {
                        reexports.entry(m.clone()).or_default().insert(name, abs);
                    }
                }
            }
            code.insert(m.clone(), kept);
        }
        for (m, kept) in &code {
            let s = kept.as_bytes();
            let mut i = 0;
            while let Some(off) = kept[i..].find("::") {
                let colons = i + off;
                let start = (0..colons).rev().take_while(|&j| is_ident(s[j])).last();
                i = colons + 2;
                let Some(start) = start else { continue };
                if start > 0 && (s[start - 1] == b':' || is_ident(s[start - 1])) {
                    continue;
                }
                for (p, _) in paths_at(s, start).0 {
                    let Some(abs) = graph.absolute(m, &p) else {
                        continue;
                    };
                    let Some(target) = graph.resolve(&abs, &reexports, &skipped, 0) else {
                        continue;
                    };
                    // A module may use what encloses it (a child of `store` using `super::X`);
                    // the crate root is the exception: nothing should import the boot code.
                    let encloses = !target.is_empty() && m.starts_with(&target);
                    if target != *m && !encloses {
                        graph
                            .why
                            .entry((m.clone(), target.clone()))
                            .or_insert(p.join("::"));
                        graph.edges.entry(m.clone()).or_default().insert(target);
                    }
                }
            }
        }
        graph
    }

    /// The absolute module path of `path` written in module `m`, or `None` for another crate's.
    fn absolute(&self, m: &ModPath, path: &[String]) -> Option<ModPath> {
        let (head, rest) = path.split_first()?;
        match head.as_str() {
            "crate" => Some(rest.to_vec()),
            "self" => Some(m.iter().chain(rest).cloned().collect()),
            "super" => {
                let mut base = m.clone();
                let mut rest = path;
                while let Some(("super", tail)) = rest.split_first().map(|(h, t)| (h.as_str(), t)) {
                    base.pop();
                    rest = tail;
                }
                Some(base.into_iter().chain(rest.iter().cloned()).collect())
            }
            _ => {
                let mut child = m.clone();
                child.push(head.clone());
                self.files
                    .contains_key(&child)
                    .then(|| m.iter().chain(path).cloned().collect())
            }
        }
    }

    /// The file defining the item `path` names, re-exports followed.
    fn resolve(
        &self,
        path: &[String],
        reexports: &BTreeMap<ModPath, BTreeMap<String, ModPath>>,
        skipped: &[ModPath],
        depth: usize,
    ) -> Option<ModPath> {
        if skipped.iter().any(|s| path.starts_with(s)) {
            return None;
        }
        for n in (0..=path.len()).rev() {
            let module = path[..n].to_vec();
            if self.files.contains_key(&module) {
                let target = path
                    .get(n)
                    .and_then(|name| reexports.get(&module)?.get(name))
                    .filter(|_| depth < 8);
                return match target {
                    Some(t) => {
                        let mut next = t.clone();
                        next.extend_from_slice(&path[n + 1..]);
                        self.resolve(&next, reexports, skipped, depth + 1)
                    }
                    None => Some(module),
                };
            }
        }
        None
    }

    /// Strongly connected components of more than one file (Tarjan).
    fn components(&self) -> Vec<Vec<ModPath>> {
        struct Walk<'g> {
            graph: &'g ModuleGraph,
            index: BTreeMap<ModPath, usize>,
            low: BTreeMap<ModPath, usize>,
            stack: Vec<ModPath>,
            out: Vec<Vec<ModPath>>,
        }
        impl Walk<'_> {
            fn visit(&mut self, v: &ModPath) {
                let n = self.index.len();
                self.index.insert(v.clone(), n);
                self.low.insert(v.clone(), n);
                self.stack.push(v.clone());
                for w in self.graph.edges.get(v).into_iter().flatten() {
                    if !self.index.contains_key(w) {
                        self.visit(w);
                        let lw = self.low[w];
                        let lv = self.low.get_mut(v).unwrap();
                        *lv = (*lv).min(lw);
                    } else if self.stack.contains(w) {
                        let iw = self.index[w];
                        let lv = self.low.get_mut(v).unwrap();
                        *lv = (*lv).min(iw);
                    }
                }
                if self.low[v] == self.index[v] {
                    let at = self.stack.iter().rposition(|x| x == v).unwrap();
                    let mut comp = self.stack.split_off(at);
                    comp.sort();
                    if comp.len() > 1 {
                        self.out.push(comp);
                    }
                }
            }
        }
        let mut walk = Walk {
            graph: self,
            index: BTreeMap::new(),
            low: BTreeMap::new(),
            stack: Vec::new(),
            out: Vec::new(),
        };
        for v in self.files.keys() {
            if !walk.index.contains_key(v) {
                walk.visit(v);
            }
        }
        let mut out = walk.out;
        out.sort_by_key(|c| std::cmp::Reverse(c.len()));
        out
    }

    /// The components with a loop through more than two files, each described. A component
    /// has none exactly when its every edge goes both ways and those pairs form a tree (a parent
    /// module and a child using each other, several times over).
    fn long_loops(&self) -> Vec<String> {
        let mut out = Vec::new();
        for comp in self.components() {
            let inside = |m: &ModPath| comp.contains(m);
            let mut pairs = BTreeSet::new();
            let mut one_way = Vec::new();
            for a in &comp {
                for b in self
                    .edges
                    .get(a)
                    .into_iter()
                    .flatten()
                    .filter(|b| inside(b))
                {
                    pairs.insert(if a < b { (a, b) } else { (b, a) });
                    if !self.edges.get(b).is_some_and(|e| e.contains(a)) {
                        one_way.push(format!(
                            "{} -> {} ({})",
                            self.files[a],
                            self.files[b],
                            self.why[&(a.clone(), b.clone())]
                        ));
                    }
                }
            }
            if one_way.is_empty() && pairs.len() + 1 == comp.len() {
                continue;
            }
            let names: Vec<&str> = comp.iter().map(|m| self.files[m].as_str()).collect();
            out.push(format!(
                "a loop through {} files: {}; one-way imports inside it: {}",
                comp.len(),
                names.join(", "),
                one_way.join("; ")
            ));
        }
        out
    }
}

fn sources_of(dir: &Path) -> BTreeMap<String, String> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .replace('\\', "/");
                out.insert(rel, std::fs::read_to_string(&path).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn crate_graph(krate: &str, skip: &[&str]) -> ModuleGraph {
    ModuleGraph::of(
        &sources_of(&workspace_root().join("crates").join(krate).join("src")),
        skip,
    )
}

#[test]
fn no_import_loop_in_the_server_passes_through_more_than_two_files() {
    // The audit log and the witness leave the server for their own crate; until then their
    // files are not counted here.
    let server = crate_graph("countersign-server", &["audit/", "witness.rs"]);
    let sizes: Vec<usize> = server.components().iter().map(Vec::len).collect();
    println!(
        "countersign-server: {} files; import loops (strongly connected components) of {sizes:?} files",
        server.files.len()
    );
    let long = server.long_loops();
    assert!(long.is_empty(), "countersign-server:\n{}", long.join("\n"));
}

#[test]
fn nothing_imports_the_cli_root() {
    let cli = crate_graph("countersign-cli", &[]);
    let root = ModPath::new();
    let importers: Vec<String> = cli
        .edges
        .iter()
        .filter(|(_, to)| to.contains(&root))
        .map(|(from, _)| {
            format!(
                "{} ({})",
                cli.files[from],
                cli.why[&(from.clone(), root.clone())]
            )
        })
        .collect();
    assert!(
        importers.is_empty(),
        "main.rs only boots; these import from it: {}",
        importers.join(", ")
    );
}

fn graph_of(files: &[(&str, &str)]) -> ModuleGraph {
    let sources = files
        .iter()
        .map(|(p, s)| ((*p).to_owned(), (*s).to_owned()))
        .collect();
    ModuleGraph::of(&sources, &[])
}

#[test]
fn a_loop_through_three_files_is_found_and_named() {
    let graph = graph_of(&[
        ("lib.rs", "mod clock;\nmod store;\nmod serve;\n"),
        ("clock.rs", "use crate::store::Store;\n"),
        (
            "store/mod.rs",
            "pub struct Store;\nfn f() { crate::serve::files::DATABASE; }\n",
        ),
        (
            "serve.rs",
            "pub mod files { pub const DATABASE: &str = \"x\"; }\nuse crate::clock::now;\n",
        ),
    ]);
    assert_eq!(
        graph.components().iter().map(Vec::len).collect::<Vec<_>>(),
        [3]
    );
    let long = graph.long_loops();
    assert_eq!(long.len(), 1, "{long:?}");
    assert!(
        long[0].starts_with("a loop through 3 files: clock.rs, serve.rs, store/mod.rs;"),
        "{}",
        long[0]
    );
    assert!(
        long[0].contains("store/mod.rs -> serve.rs (crate::serve::files::DATABASE)"),
        "{}",
        long[0]
    );
}

#[test]
fn a_parent_and_its_children_using_each_other_is_no_long_loop_and_re_exports_are_followed() {
    let graph = graph_of(&[
        (
            "lib.rs",
            "mod service;\nmod store;\npub use store::Store;\n",
        ),
        (
            "service/mod.rs",
            "mod a;\nmod b;\npub use a::A;\npub struct AppState { b: b::B }\n",
        ),
        (
            "service/a.rs",
            "use super::AppState;\npub struct A;\nfn f(s: crate::Store) {}\n",
        ),
        ("service/b.rs", "use super::AppState;\npub struct B;\n"),
        (
            "store/mod.rs",
            "pub struct Store;\n#[cfg(test)]\nmod tests {\n    use crate::service::A;\n}\n",
        ),
    ]);
    // `crate::Store` is the store's (the root only re-exports it); the test module is not counted.
    let service_a = vec!["service".to_owned(), "a".to_owned()];
    let store = vec!["store".to_owned()];
    assert_eq!(graph.edges[&service_a], BTreeSet::from([store.clone()]));
    assert!(!graph.edges.contains_key(&store));
    // The parent uses b; b's use of its parent is not counted (a module may use what encloses
    // it), and the facade `pub use a::A` is followed, not counted as an import of a.
    assert_eq!(graph.components(), Vec::<Vec<ModPath>>::new());
    assert!(graph.long_loops().is_empty());
    assert!(!graph.edges.contains_key(&ModPath::new()));
}
