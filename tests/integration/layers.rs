//! The layering of the sources, checked by reading them (no crate API is used): model families live in their own
//! folders, shared code beside them never names a family, and one registry module per crate holds the only
//! `match` on the family.
//!
//! * A family folder is a directory named in [`families`] directly under a crate's `src/` root
//!   (`engines/src/toto2/`, or a single file `engines/src/toto2.rs`).
//! * A registry module is `registry.rs` or `registry/` directly under a crate's `src/` root.
//! * [`imports_follow_the_layers`]: a file in family F references no other family's modules (in any crate); a file
//!   outside every family folder that is not a registry module references no family module at all. References are
//!   the paths of `use` statements (grouped, multi-line, `pub use`, `self`/`super`/`crate`/crate-name paths) and
//!   the qualified paths in code (`crate::toto2::check(..)`, `exporter::toto1::config::X`); comments and string
//!   literals are not read.
//! * [`family_names_stay_in_family_folders`]: `grep -rnE "Toto1|Toto2|toto1::|toto2::"` over the crates' sources
//!   finds nothing outside family folders and registry modules.
//! * [`modules_import_without_cycles`]: within each crate, no module imports a module that imports it back,
//!   directly or through others (the same references, test modules left out).
//! * [`long_files_say_why`]: a `.rs` file over [`LONG_FILE_LINES`] lines says why within its first
//!   [`LONG_FILE_HEADER`] lines, in a comment holding `long-file: <reason>`.
//!
//! Paths are resolved from the files' places alone: `#[path]` attributes and `mod` items declared inline are not
//! followed, and a bare `toto2::x` in code resolves from the file's own module (the `use` that imported `toto2`
//! into another module is where that reference is reported).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The model families, each a folder under a crate's `src/`: the folders the one family enum names, so a new
/// family is checked as soon as it has a variant.
fn families() -> Vec<&'static str> {
    exporter::registry::Family::ALL.iter().map(|f| f.capabilities().folder).collect()
}

/// The crates whose sources are checked: their directories under the repository root (a missing one is skipped).
const CRATES: &[&str] = &[".", "engines", "exporter", "backtest", "tables", "python"];

/// A `.rs` file over this many lines must say why.
const LONG_FILE_LINES: usize = 800;
/// ... within this many first lines.
const LONG_FILE_HEADER: usize = 30;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// One crate: its name in paths (`engines`), its directory relative to the repository, its `src/` root.
struct Crate {
    name: String,
    dir: String,
    src: PathBuf,
}

/// The library name of the crate in `dir` (its `[lib] name`, else its `[package] name`, `-` read as `_`).
fn crate_name(dir: &Path) -> String {
    let text = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap_or_default();
    let (mut section, mut lib, mut package) = (String::new(), None, None);
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line.to_string();
        } else if let Some(v) = line.strip_prefix("name").map(str::trim).and_then(|r| r.strip_prefix('=')) {
            let v = v.trim().trim_matches('"').replace('-', "_");
            match section.as_str() {
                "[lib]" => lib = lib.or(Some(v)),
                "[package]" => package = package.or(Some(v)),
                _ => {}
            }
        }
    }
    lib.or(package).unwrap_or_else(|| panic!("{}: no crate name", dir.display()))
}

fn crates() -> Vec<Crate> {
    CRATES
        .iter()
        .map(|d| repo().join(d))
        .filter(|d| d.join("src").is_dir())
        .map(|d| Crate {
            name: crate_name(&d),
            dir: d.strip_prefix(repo()).unwrap().to_string_lossy().into_owned(),
            src: d.join("src"),
        })
        .collect()
}

/// Every file under `dir` (sorted), `.rs` files only if `rs_only`.
fn files(dir: &Path, rs_only: bool) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy();
            if path.is_dir() {
                if !name.starts_with('.') && name != "target" && name != "node_modules" {
                    stack.push(path);
                }
            } else if !rs_only || name.ends_with(".rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// Where a file sits in its crate: `Family("toto2")`, `Registry` or `Shared`.
#[derive(Debug, Clone, PartialEq)]
enum Layer {
    Family(String),
    Registry,
    Shared,
}

impl std::fmt::Display for Layer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Layer::Family(name) => write!(f, "family {name}"),
            Layer::Registry => f.write_str("registry"),
            Layer::Shared => f.write_str("shared code"),
        }
    }
}

/// The layer of a file from its path under its crate's `src/` (`toto2/engine.rs`, `registry.rs`, `cmd/x.rs`).
fn layer_of(rel: &Path, families: &[&str]) -> Layer {
    let first =
        rel.components().next().map(|c| c.as_os_str().to_string_lossy().into_owned()).unwrap_or_default();
    let stem = first.strip_suffix(".rs").unwrap_or(&first);
    let is_dir = rel.components().count() > 1;
    if families.contains(&stem) && (is_dir || first.ends_with(".rs")) {
        Layer::Family(stem.to_string())
    } else if stem == "registry" {
        Layer::Registry
    } else {
        Layer::Shared
    }
}

/// The module path of a file from its path under its crate's `src/`: `main.rs`, `lib.rs` -> `[]`, `a/mod.rs` ->
/// `[a]`, `a/b.rs` -> `[a, b]`.
fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> =
        rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    let last = parts.pop().unwrap_or_default();
    let stem = last.strip_suffix(".rs").unwrap_or(&last);
    let at_root = parts.is_empty();
    if !(stem == "mod" || (at_root && (stem == "main" || stem == "lib"))) {
        parts.push(stem.to_string());
    }
    parts
}

// ---- tokens ----

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    /// `::`
    Path,
    /// Any other punctuation character.
    Punct(char),
}

/// The identifiers, `::` and punctuation of Rust source, with their 1-based lines; comments (nested block
/// comments included), string, byte-string, raw-string and character literals, numbers and lifetimes dropped.
fn tokens(src: &str) -> Vec<(Tok, usize)> {
    let c: Vec<char> = src.chars().collect();
    let (mut i, mut line, mut out) = (0, 1, Vec::new());
    // Skips a quoted literal whose opening quote is at `i`; returns the index after the closing one.
    let skip_quoted = |mut i: usize, line: &mut usize| {
        i += 1;
        while i < c.len() && c[i] != '"' {
            if c[i] == '\\' {
                i += 1;
            }
            if i < c.len() && c[i] == '\n' {
                *line += 1;
            }
            i += 1;
        }
        i + 1
    };
    while i < c.len() {
        let ch = c[i];
        let next = c.get(i + 1).copied();
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && next == Some('/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && next == Some('*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if c[i] == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
            }
        } else if ch == '"' {
            i = skip_quoted(i, &mut line);
        } else if ch == '\'' {
            if next == Some('\\') {
                // an escaped character literal: '\n', '\'', '\u{1F600}'
                i += 3;
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if c.get(i + 2) == Some(&'\'') {
                i += 3; // 'x'
            } else {
                // a lifetime or label: 'a, 'static
                i += 1;
                while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                    i += 1;
                }
            }
        } else if ch.is_ascii_digit() {
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_' || c[i] == '.') {
                // `1..n`: a range, not part of the number
                if c[i] == '.' && c.get(i + 1) == Some(&'.') {
                    break;
                }
                i += 1;
            }
        } else if ch.is_alphabetic() || ch == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            let word: String = c[start..i].iter().collect();
            let at = c.get(i).copied();
            if matches!(word.as_str(), "r" | "br" | "cr") && matches!(at, Some('#') | Some('"')) {
                let mut hashes = 0;
                while c.get(i + hashes) == Some(&'#') {
                    hashes += 1;
                }
                if c.get(i + hashes) == Some(&'"') {
                    // a raw string: ends at `"` followed by as many `#`
                    i += hashes + 1;
                    while i < c.len() && !(c[i] == '"' && (1..=hashes).all(|k| c.get(i + k) == Some(&'#'))) {
                        if c[i] == '\n' {
                            line += 1;
                        }
                        i += 1;
                    }
                    i += 1 + hashes;
                    continue;
                }
                // a raw identifier: r#type
                i += 1;
                let start = i;
                while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                    i += 1;
                }
                out.push((Tok::Ident(c[start..i].iter().collect()), line));
            } else if matches!(word.as_str(), "b" | "c") && at == Some('"') {
                i = skip_quoted(i, &mut line);
            } else if word == "b" && at == Some('\'') {
                // b'x' / b'\n': the character literal branch skips it next
            } else {
                out.push((Tok::Ident(word), line));
            }
        } else if ch == ':' && next == Some(':') {
            out.push((Tok::Path, line));
            i += 2;
        } else {
            out.push((Tok::Punct(ch), line));
            i += 1;
        }
    }
    out
}

// ---- references ----

/// One path that a file names, as written (`super::toto2::x`) and the line it is on.
#[derive(Debug, Clone, PartialEq)]
struct Reference {
    segments: Vec<String>,
    line: usize,
}

/// The paths of a use tree starting at `toks[*i]`, each prefixed by `prefix`; stops before the `,` `}` or `;` that
/// ends the tree. `{self, ..}` names the prefix itself; `as name` and `*` add nothing to the path.
fn use_tree(toks: &[(Tok, usize)], i: &mut usize, prefix: &[String], out: &mut Vec<Reference>) {
    let mut path = prefix.to_vec();
    let mut line = None;
    while let Some((tok, l)) = toks.get(*i) {
        match tok {
            Tok::Ident(word) if word == "as" => *i += 2,
            Tok::Ident(word) => {
                if word != "self" || path.is_empty() {
                    path.push(word.clone());
                }
                line = Some(*l);
                *i += 1;
            }
            Tok::Punct('{') => {
                *i += 1;
                while let Some((tok, _)) = toks.get(*i) {
                    match tok {
                        Tok::Punct('}') => {
                            *i += 1;
                            return;
                        }
                        Tok::Punct(',') => *i += 1,
                        _ => use_tree(toks, i, &path, out),
                    }
                }
                return;
            }
            Tok::Punct('*') => {
                line = Some(*l);
                *i += 1;
            }
            Tok::Punct(',' | '}' | ';') => break,
            Tok::Path | Tok::Punct(_) => *i += 1,
        }
    }
    if let (Some(line), false) = (line, path.is_empty()) {
        out.push(Reference { segments: path, line });
    }
}

/// Every path a source names: the leaves of its `use` trees and the qualified paths (`a::b`) in its code.
fn references(src: &str) -> Vec<Reference> {
    let toks = tokens(src);
    let mut out = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        match &toks[i].0 {
            Tok::Ident(word) if word == "use" => {
                i += 1;
                while i < toks.len() && toks[i].0 != Tok::Punct(';') {
                    let before = i;
                    use_tree(&toks, &mut i, &[], &mut out);
                    if i == before {
                        i += 1; // a stray `,` or `}`
                    }
                }
            }
            Tok::Ident(_) if i == 0 || toks[i - 1].0 != Tok::Path => {
                let (start, line) = (i, toks[i].1);
                let mut segments = Vec::new();
                while let Some((Tok::Ident(w), _)) = toks.get(i) {
                    segments.push(w.clone());
                    if toks.get(i + 1).map(|t| &t.0) == Some(&Tok::Path)
                        && matches!(toks.get(i + 2), Some((Tok::Ident(_), _)))
                    {
                        i += 2;
                    } else {
                        break;
                    }
                }
                i = i.max(start) + 1;
                if segments.len() > 1 {
                    out.push(Reference { segments, line });
                }
            }
            _ => i += 1,
        }
    }
    out
}

/// A path resolved from module `module` of crate `krate`: `(crate, path from its root)`; `None` if it leaves the
/// crates (`std::`, a `super` above the root).
fn resolve(
    r: &Reference,
    krate: &str,
    module: &[String],
    crates: &[String],
) -> Option<(String, Vec<String>)> {
    let s = &r.segments;
    let first = s.first()?.trim_start_matches('$');
    match first {
        "crate" => Some((krate.to_string(), s[1..].to_vec())),
        "self" => Some((krate.to_string(), module.iter().chain(&s[1..]).cloned().collect())),
        "super" => {
            let ups = s.iter().take_while(|x| *x == "super").count();
            let base = module.get(..module.len().checked_sub(ups)?)?;
            Some((krate.to_string(), base.iter().chain(&s[ups..]).cloned().collect()))
        }
        name if crates.iter().any(|c| c == name) && name != krate => {
            Some((name.to_string(), s[1..].to_vec()))
        }
        _ => Some((krate.to_string(), module.iter().chain(s).cloned().collect())),
    }
}

/// A violation: `file:line: <layer> imports <target>`.
fn check_file(
    shown: &str,
    src: &str,
    layer: &Layer,
    krate: &str,
    module: &[String],
    crates: &[String],
    families: &[&str],
) -> (usize, Vec<String>) {
    let refs = references(src);
    let mut bad = Vec::new();
    for r in &refs {
        let Some((target_crate, path)) = resolve(r, krate, module, crates) else { continue };
        let Some(family) = path.first().filter(|f| families.contains(&f.as_str())) else { continue };
        let allowed = match layer {
            Layer::Family(own) => own == family,
            Layer::Registry => true,
            Layer::Shared => false,
        };
        if !allowed {
            bad.push(format!("{shown}:{}: {layer} imports {target_crate}::{}", r.line, path.join("::")));
        }
    }
    (refs.len(), bad)
}

#[test]
fn imports_follow_the_layers() {
    let fams = families();
    let crates = crates();
    let names: Vec<String> = crates.iter().map(|c| c.name.clone()).collect();
    let (mut n_files, mut n_refs, mut bad) = (0, 0, Vec::new());
    for k in &crates {
        for path in files(&k.src, true) {
            let rel = path.strip_prefix(&k.src).unwrap();
            let shown = path.strip_prefix(repo()).unwrap().display().to_string();
            let src = std::fs::read_to_string(&path).unwrap();
            let (refs, mut v) =
                check_file(&shown, &src, &layer_of(rel, &fams), &k.name, &module_of(rel), &names, &fams);
            n_files += 1;
            n_refs += refs;
            bad.append(&mut v);
        }
    }
    let dirs: Vec<&str> = crates.iter().map(|c| c.dir.as_str()).collect();
    assert!(
        bad.is_empty(),
        "{} references cross the family layers (families {:?}; a family's files name no other family, \
         shared files name none, registry modules may):\n{}\n{} violations",
        bad.len(),
        fams,
        bad.join("\n"),
        bad.len()
    );
    println!("layers: {n_files} files, {n_refs} references checked in crates {dirs:?}");
}

/// The words that name family `f` outside its folder: `Toto2` (its type and variant names) and `toto2::`.
fn family_words(f: &str) -> [String; 2] {
    let mut camel: Vec<char> = f.chars().collect();
    camel[0] = camel[0].to_ascii_uppercase();
    [camel.into_iter().collect(), format!("{f}::")]
}

#[test]
fn family_names_stay_in_family_folders() {
    let fams = families();
    let words: Vec<String> = fams.iter().flat_map(|f| family_words(f)).collect();
    let (mut all_lines, mut all_files) = (0, 0);
    let mut outside: Vec<String> = Vec::new();
    let mut outside_files = BTreeSet::new();
    for k in crates() {
        for path in files(&k.src, false) {
            let Ok(text) = std::fs::read_to_string(&path) else { continue }; // binary files
            let rel = path.strip_prefix(&k.src).unwrap();
            let shown = path.strip_prefix(repo()).unwrap().display().to_string();
            let exempt = layer_of(rel, &fams) != Layer::Shared;
            let mut hit = false;
            for (n, line) in text.lines().enumerate() {
                if words.iter().any(|w| line.contains(w.as_str())) {
                    hit = true;
                    all_lines += 1;
                    if !exempt {
                        outside.push(format!("{shown}:{}: {}", n + 1, line.trim()));
                        outside_files.insert(shown.clone());
                    }
                }
            }
            all_files += usize::from(hit);
        }
    }
    let summary = format!(
        "{} lines in {} files outside family folders and registry modules name a family ({words:?}); \
         the whole grep finds {all_lines} lines in {all_files} files",
        outside.len(),
        outside_files.len()
    );
    println!("family names: {summary}");
    assert!(outside.is_empty(), "{}\n{summary}", outside.join("\n"));
}

#[test]
fn long_files_say_why() {
    let mut long = Vec::new();
    let mut checked = 0;
    for path in files(&repo(), true) {
        let text = std::fs::read_to_string(&path).unwrap();
        let lines = text.lines().count();
        checked += 1;
        if lines <= LONG_FILE_LINES {
            continue;
        }
        let says_why = text.lines().take(LONG_FILE_HEADER).any(|l| {
            let l = l.trim_start();
            l.starts_with("//")
                && l.split_once("long-file:")
                    .is_some_and(|(_, why)| why.trim().chars().any(char::is_alphanumeric))
        });
        if !says_why {
            long.push(format!("{}: {lines} lines", path.strip_prefix(repo()).unwrap().display()));
        }
    }
    assert!(
        long.is_empty(),
        "files over {LONG_FILE_LINES} lines without a `// long-file: <reason>` comment in their first \
         {LONG_FILE_HEADER} lines (split them, or say why they stay whole):\n{}\n{} files",
        long.join("\n"),
        long.len()
    );
    println!("long files: {checked} .rs files checked");
}

// ---- module cycles ----

/// `src` without its trailing test module (`#[cfg(test)] mod tests { .. }`, by convention the file's last item):
/// tests may reach into any module, and they are not part of the layering.
fn without_tests(src: &str) -> &str {
    let mut from = 0;
    while let Some(at) = src[from..].find("#[cfg(test)]").map(|i| from + i) {
        let rest = src[at + "#[cfg(test)]".len()..].trim_start();
        let rest = rest.strip_prefix("pub(crate) ").or_else(|| rest.strip_prefix("pub ")).unwrap_or(rest);
        if rest.starts_with("mod ") {
            return &src[..at];
        }
        from = at + 1;
    }
    src
}

/// The import graph of one crate: each module to the modules its (non-test) code names. A path names the
/// longest module that prefixes it; naming an ancestor module (`super::X` where the parent re-exports `X`) is
/// the module tree, not an import, and is not an edge.
fn import_graph(k: &Crate, crates: &[String]) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let sources: Vec<(Vec<String>, String)> = files(&k.src, true)
        .into_iter()
        .map(|p| (module_of(p.strip_prefix(&k.src).unwrap()), std::fs::read_to_string(&p).unwrap()))
        .collect();
    let modules: BTreeSet<Vec<String>> = sources.iter().map(|(m, _)| m.clone()).collect();
    let mut graph = BTreeMap::new();
    for (module, src) in &sources {
        let mut to = BTreeSet::new();
        for r in references(without_tests(src)) {
            let Some((krate, path)) = resolve(&r, &k.name, module, crates) else { continue };
            if krate != k.name {
                continue;
            }
            let target = (1..=path.len()).rev().map(|n| path[..n].to_vec()).find(|c| modules.contains(c));
            if let Some(t) = target.filter(|t| t != module && !module.starts_with(t)) {
                to.insert(t);
            }
        }
        graph.insert(module.clone(), to);
    }
    graph
}

/// The strongly connected components of more than one module (Tarjan), each sorted: the import cycles.
fn cycles(graph: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Vec<Vec<String>> {
    struct Walk<'g> {
        graph: &'g BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        index: BTreeMap<&'g [String], (usize, usize)>,
        stack: Vec<&'g [String]>,
        out: Vec<Vec<String>>,
    }
    fn visit<'g>(w: &mut Walk<'g>, v: &'g [String]) {
        let n = w.index.len();
        w.index.insert(v, (n, n));
        w.stack.push(v);
        for t in w.graph.get(v).into_iter().flatten() {
            let low = match w.index.get(t.as_slice()) {
                None => {
                    visit(w, t);
                    w.index[t.as_slice()].1
                }
                Some(&(i, _)) if w.stack.contains(&t.as_slice()) => i,
                Some(_) => continue,
            };
            let e = w.index.get_mut(v).unwrap();
            e.1 = e.1.min(low);
        }
        if w.index[v].0 == w.index[v].1 {
            let at = w.stack.iter().rposition(|m| *m == v).unwrap();
            let comp: Vec<&[String]> = w.stack.split_off(at);
            if comp.len() > 1 {
                let mut names: Vec<String> = comp.iter().map(|m| m.join("::")).collect();
                names.sort();
                w.out.push(names);
            }
        }
    }
    let mut w = Walk { graph, index: BTreeMap::new(), stack: Vec::new(), out: Vec::new() };
    for v in graph.keys() {
        if !w.index.contains_key(v.as_slice()) {
            visit(&mut w, v);
        }
    }
    w.out
}

#[test]
fn modules_import_without_cycles() {
    let crates = crates();
    let names: Vec<String> = crates.iter().map(|c| c.name.clone()).collect();
    let mut found = Vec::new();
    for k in &crates {
        let graph = import_graph(k, &names);
        let edges: usize = graph.values().map(BTreeSet::len).sum();
        println!("module cycles: {} ({} modules, {edges} import edges)", k.dir, graph.len());
        for c in cycles(&graph) {
            found.push(format!("{}: {}", k.dir, c.join(", ")));
        }
    }
    assert!(
        found.is_empty(),
        "import cycles between modules (each line one cycle; move the shared item below both, or pass it in):\n{}",
        found.join("\n")
    );
}

// ---- the checker's own tests ----

fn seg(r: &Reference) -> String {
    r.segments.join("::")
}

#[test]
fn grouped_multiline_and_pub_uses_are_read_leaf_by_leaf() {
    let src = "pub use crate::{\n    toto2::{self, engine::Engine as E},\n    shared::*,\n};\nuse exporter::toto1::config;\n";
    let refs = references(src);
    let got: Vec<(String, usize)> = refs.iter().map(|r| (seg(r), r.line)).collect();
    assert_eq!(
        got,
        [
            ("crate::toto2".to_string(), 2),
            ("crate::toto2::engine::Engine".to_string(), 2),
            ("crate::shared".to_string(), 3),
            ("exporter::toto1::config".to_string(), 5),
        ]
    );
}

#[test]
fn super_and_self_resolve_from_the_file_module() {
    let crates = ["engines".to_string(), "exporter".to_string()];
    let module = module_of(Path::new("serve/http/mod.rs"));
    assert_eq!(module, ["serve", "http"]);
    let r = |s: &str| Reference { segments: s.split("::").map(String::from).collect(), line: 1 };
    let res = |s: &str| resolve(&r(s), "totoc", &module, &crates);
    assert_eq!(res("super::super::toto2::x"), Some(("totoc".into(), vec!["toto2".into(), "x".into()])));
    assert_eq!(res("super::toto2"), Some(("totoc".into(), vec!["serve".into(), "toto2".into()])));
    assert_eq!(res("self::a"), Some(("totoc".into(), vec!["serve".into(), "http".into(), "a".into()])));
    assert_eq!(res("super::super::super::x"), None);
    assert_eq!(res("exporter::toto1::X"), Some(("exporter".into(), vec!["toto1".into(), "X".into()])));
    assert_eq!(module_of(Path::new("main.rs")), Vec::<String>::new());
    assert_eq!(module_of(Path::new("toto2.rs")), ["toto2"]);
    assert_eq!(layer_of(Path::new("toto2.rs"), &families()), Layer::Family("toto2".into()));
    assert_eq!(layer_of(Path::new("toto2/a/b.rs"), &families()), Layer::Family("toto2".into()));
    assert_eq!(layer_of(Path::new("graph/toto2.rs"), &families()), Layer::Shared);
    assert_eq!(layer_of(Path::new("registry/mod.rs"), &families()), Layer::Registry);
    // a root file's bare path is a child module of the root
    let root: Vec<String> = Vec::new();
    assert_eq!(resolve(&r("toto1::f"), "totoc", &root, &crates).unwrap().1, ["toto1", "f"]);
}

#[test]
fn comments_strings_chars_and_lifetimes_are_not_read() {
    let src = r####"
// use crate::toto1::a;
/* crate::toto1::b /* nested */ crate::toto1::c */
/// exporter::toto1::d
fn f<'a>(x: &'a str) -> char {
    let s = "crate::toto1::e \" crate::toto1::f";
    let r = r#"crate::toto1::g "still" crate::toto1::h"#;
    let b = b"crate::toto1::i";
    let q = '"'; let e = '\''; let by = b'"';
    crate::toto2::check_request(x, 1..2, 1.5e3);
    'l: loop { break 'l; }
    engines::toto1::Engine::new()
}
"####;
    let got: Vec<(String, usize)> = references(src).iter().map(|r| (seg(r), r.line)).collect();
    assert_eq!(
        got,
        [("crate::toto2::check_request".to_string(), 10), ("engines::toto1::Engine::new".to_string(), 12)]
    );
}

#[test]
fn violations_are_reported_with_file_line_and_layers() {
    let crates = ["totoc".to_string(), "engines".to_string(), "exporter".to_string()];
    let src = "use crate::toto2::engine;\nuse super::toto1::x;\nuse super::super::toto1::y;\n\
               fn f() { exporter::toto1::config::load(); }\n";
    let at = |rel: &str| (layer_of(Path::new(rel), &families()), module_of(Path::new(rel)));
    let (layer, module) = at("toto2/build.rs");
    let (n, bad) =
        check_file("engines/src/toto2/build.rs", src, &layer, "engines", &module, &crates, &families());
    assert_eq!(n, 4);
    // `super::toto1` of toto2/build.rs is toto2::toto1, inside the family
    assert_eq!(
        bad,
        [
            "engines/src/toto2/build.rs:3: family toto2 imports engines::toto1::y",
            "engines/src/toto2/build.rs:4: family toto2 imports exporter::toto1::config::load",
        ]
    );
    let (layer, module) = at("serve/a.rs");
    let (_, bad) = check_file("src/serve/a.rs", src, &layer, "totoc", &module, &crates, &families());
    assert_eq!(
        bad,
        [
            "src/serve/a.rs:1: shared code imports totoc::toto2::engine",
            "src/serve/a.rs:3: shared code imports totoc::toto1::y",
            "src/serve/a.rs:4: shared code imports exporter::toto1::config::load",
        ]
    );
    let (layer, module) = at("registry/mod.rs");
    let (_, bad) = check_file("src/registry/mod.rs", src, &layer, "totoc", &module, &crates, &families());
    assert!(bad.is_empty(), "{bad:?}");
}

#[test]
fn cycles_are_found_and_tests_are_not_read() {
    let m = |s: &str| s.split("::").map(String::from).collect::<Vec<_>>();
    let mut g: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    g.insert(m("a"), [m("b")].into());
    g.insert(m("b"), [m("c")].into());
    g.insert(m("c"), [m("a")].into());
    g.insert(m("d"), [m("a")].into());
    assert_eq!(cycles(&g), vec![vec!["a".to_string(), "b".into(), "c".into()]]);
    g.insert(m("c"), BTreeSet::new());
    assert!(cycles(&g).is_empty());
    let src = "use crate::a;\n#[cfg(test)]\nfn helper() {}\n#[cfg(test)]\npub(crate) mod tests {\n use crate::b;\n}\n";
    assert_eq!(without_tests(src), "use crate::a;\n#[cfg(test)]\nfn helper() {}\n");
}
