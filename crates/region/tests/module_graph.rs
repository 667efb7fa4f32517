//! The workspace's files import each other without circles: none at all among the region's
//! files, none of three files or more in any crate. An import here is a path through `crate::`
//! or `super::` (braced lists too) outside a file's test module, resolved to the file of the
//! deepest module it names.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Graph = BTreeMap<PathBuf, BTreeSet<PathBuf>>;

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module path of a file under `src`: `a/b.rs` and `a/b/mod.rs` are `[a, b]`, the crate
/// root `[]`.
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into()).collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    if parts == ["lib"] || parts == ["main"] {
        parts.clear();
    }
    parts
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The segments of a path at the start of `s` (`a::b::c`), and what follows it.
fn segments(s: &str) -> (Vec<String>, &str) {
    let mut segs = Vec::new();
    let mut rest = s;
    loop {
        let end = rest.find(|c: char| !is_ident(c)).unwrap_or(rest.len());
        if end == 0 {
            break;
        }
        segs.push(rest[..end].to_string());
        rest = &rest[end..];
        match rest.strip_prefix("::") {
            Some(r) if r.starts_with(is_ident) => rest = r,
            _ => break,
        }
    }
    (segs, rest)
}

/// The module paths `text` imports through `crate::` or `super::`, from a file at `module`.
fn imports(text: &str, module: &[String]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for (root, base) in [
        ("crate::", &[][..]),
        ("super::", &module[..module.len().saturating_sub(1)]),
    ] {
        for (at, _) in text.match_indices(root) {
            if text[..at].ends_with(is_ident) {
                continue;
            }
            let (segs, rest) = segments(&text[at + root.len()..]);
            let mut path = base.to_vec();
            path.extend(segs);
            // A braced list after the path: each item's own path.
            let list = rest
                .strip_prefix("::{")
                .or(rest.strip_prefix('{').filter(|_| path.len() == base.len()));
            match list.and_then(|l| l.split_once('}')) {
                Some((items, _)) => {
                    for item in items.split(',') {
                        let (segs, _) = segments(item.trim());
                        let mut p = path.clone();
                        p.extend(segs);
                        out.push(p);
                    }
                }
                None => out.push(path),
            }
        }
    }
    out
}

/// The file graph of the crate whose sources are in `src`.
fn graph(src: &Path) -> Graph {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let modules: BTreeMap<Vec<String>, PathBuf> = files
        .iter()
        .map(|f| (module_path(src, f), f.clone()))
        .collect();
    let mut graph = Graph::new();
    for (module, file) in &modules {
        if module.is_empty() || module.last().is_some_and(|m| m == "tests") {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap();
        let text = text.split("#[cfg(test)]\nmod tests").next().unwrap();
        for path in imports(text, module) {
            let target = (1..=path.len()).rev().find_map(|n| modules.get(&path[..n]));
            if let Some(target) = target.filter(|t| *t != file) {
                graph
                    .entry(file.clone())
                    .or_default()
                    .insert(target.clone());
            }
        }
    }
    graph
}

/// The graph's strongly connected components of two files or more (Tarjan's algorithm).
fn circles(graph: &Graph) -> Vec<Vec<PathBuf>> {
    struct Walk<'a> {
        graph: &'a Graph,
        index: BTreeMap<&'a PathBuf, usize>,
        low: BTreeMap<&'a PathBuf, usize>,
        stack: Vec<&'a PathBuf>,
        found: Vec<Vec<PathBuf>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, v: &'a PathBuf) {
            let i = self.index.len();
            self.index.insert(v, i);
            self.low.insert(v, i);
            self.stack.push(v);
            for w in self.graph.get(v).into_iter().flatten() {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w]);
                    self.low.insert(v, low);
                } else if self.stack.contains(&w) {
                    let low = self.low[v].min(self.index[w]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let at = self.stack.iter().rposition(|x| *x == v).unwrap();
                let component: Vec<PathBuf> = self.stack.drain(at..).cloned().collect();
                if component.len() > 1 {
                    self.found.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !walk.index.contains_key(v) {
            walk.visit(v);
        }
    }
    walk.found
}

#[test]
fn no_file_imports_its_way_back_to_itself() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut wrong = Vec::new();
    for entry in std::fs::read_dir(crates).unwrap() {
        let src = entry.unwrap().path().join("src");
        if !src.is_dir() {
            continue;
        }
        let region = src.parent().unwrap().ends_with("region");
        for circle in circles(&graph(&src)) {
            if region || circle.len() >= 3 {
                wrong.push(circle);
            }
        }
    }
    assert!(wrong.is_empty(), "import circles: {wrong:#?}");
}

#[test]
fn the_checker_sees_a_circle_through_braced_and_super_imports() {
    let dir = std::env::temp_dir().join(format!("uzswap-module-graph-{}", std::process::id()));
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("a")).unwrap();
    std::fs::write(src.join("lib.rs"), "mod a;\nmod b;\n").unwrap();
    std::fs::write(src.join("a/mod.rs"), "mod c;\nuse crate::{b::Thing, x};\n").unwrap();
    std::fs::write(src.join("b.rs"), "use crate::a::c::f;\n").unwrap();
    std::fs::write(
        src.join("a/c.rs"),
        "use super::g;\n#[cfg(test)]\nmod tests { use crate::b::h; }\n",
    )
    .unwrap();
    let found = circles(&graph(&src));
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].len(), 3, "a -> b -> a/c -> a: {found:?}");
}
