//! No import circle among the files of a store's folder. Each folder's `mod.rs` holds what its
//! files share (the store's kind, its error mapping, keys), a `codec.rs` the document both sides
//! use, and the other files import from those and from each other in one direction only: this
//! test draws each folder's file-level import graph from the source text and fails on a circle.
//!
//! An edge is every path through `super::` (or `crate::<folder>::`) in a file: `super::store::X`
//! is an edge to `store.rs`, `super::KIND` one to `mod.rs`. A name `mod.rs` only re-exports
//! (`super::RedisStore`) would hide the file it comes from, so it fails here too: import it from
//! its file. `mod.rs`'s own `mod` and `pub use` lines are the folder's public face, not imports;
//! anything else in it that names a file is an edge. Comments are left out (a doc link is not an
//! import), and so is an inline `mod tests { … }`, whose `super::` is its own file.
//!
//! The crate's root is not drawn: `lib.rs` (the contract) and `registry.rs` (which names every
//! store, and whose `StoreKind` every store names) depend on each other by design.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// A folder's files, by name without `.rs` (`mod` for `mod.rs`), with their text.
type Folder = BTreeMap<String, String>;

/// Each file's edges: the files it imports from.
type Graph = BTreeMap<String, BTreeSet<String>>;

/// The text without comments: each `//` to the end of its line (a `//` inside a string cuts the
/// rest of that line too, which only ever removes text).
fn without_comments(text: &str) -> String {
    text.lines().map(|l| l.find("//").map_or(l, |i| &l[..i])).collect::<Vec<_>>().join("\n")
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The identifier at the start of `s`.
fn ident(s: &str) -> &str {
    &s[..s.find(|c: char| !is_ident(c)).unwrap_or(s.len())]
}

/// The text without inline module blocks (`mod tests { … }`): their `super::` is their own file.
fn without_inline_modules(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = find_word(rest, "mod") {
        let after = &rest[at + 3..];
        let name_start = after.len() - after.trim_start().len();
        let name = ident(&after[name_start..]);
        let tail = after[name_start + name.len()..].trim_start();
        if name.is_empty() || !tail.starts_with('{') {
            out.push_str(&rest[..at + 3]);
            rest = after;
            continue;
        }
        out.push_str(&rest[..at]);
        let open = rest.len() - tail.len();
        let mut depth = 0usize;
        let mut end = rest.len();
        for (i, c) in rest[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// Where `word` first occurs in `s` as a whole word.
fn find_word(s: &str, word: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = s[from..].find(word).map(|i| i + from) {
        let before = s[..i].chars().next_back();
        let after = s[i + word.len()..].chars().next();
        if !before.is_some_and(is_ident) && !after.is_some_and(is_ident) {
            return Some(i);
        }
        from = i + word.len();
    }
    None
}

/// The first segment of every path through `super::` in `code` (`super::store::X` → `store`,
/// `super::{err, store::X}` → `err`, `store`); paths that go further up (`super::super::`) are
/// the crate's, not the folder's.
fn through_super(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(at) = find_word(rest, "super") {
        let after = &rest[at + "super".len()..];
        rest = after;
        let Some(path) = after.strip_prefix("::") else { continue };
        if path.starts_with("super") {
            rest = path;
            continue;
        }
        if let Some(group) = path.strip_prefix('{') {
            // The top-level items of the group, each item's first segment.
            let mut depth = 0usize;
            let mut item = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        out.push(ident(item.trim()).to_string());
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                item.push(c);
            }
            out.push(ident(item.trim()).to_string());
        } else {
            out.push(ident(path).to_string());
        }
    }
    out.retain(|n| !n.is_empty() && n != "self");
    out
}

/// The names `mod.rs` defines itself (items, not re-exports).
fn defined(code: &str) -> BTreeSet<String> {
    const KEYWORDS: [&str; 8] = ["const", "static", "fn", "struct", "enum", "trait", "type", "union"];
    let mut out = BTreeSet::new();
    for line in code.lines() {
        let words: Vec<&str> = line.split(|c: char| !is_ident(c)).filter(|w| !w.is_empty()).collect();
        if let Some(i) = words.iter().position(|w| KEYWORDS.contains(w)) {
            if let Some(name) = words.get(i + 1) {
                out.insert(name.to_string());
            }
        }
    }
    out
}

/// Whether a line of `mod.rs` opens a statement of the folder's public face: a module or a
/// re-export.
fn face(line: &str) -> bool {
    let l = line.trim_start();
    let l = l.strip_prefix("pub").map_or(l, |r| {
        let r = r.trim_start();
        if r.starts_with('(') {
            r.find(')').map_or(r, |i| &r[i + 1..])
        } else {
            r
        }
    });
    let l = l.trim_start();
    l.starts_with("mod ") || (line.trim_start().starts_with("pub") && l.starts_with("use "))
}

/// The folder's import graph, or what keeps it from being drawn exactly.
fn graph(name: &str, folder: &Folder) -> Result<Graph, Vec<String>> {
    let files: BTreeSet<String> = folder.keys().filter(|f| *f != "mod").cloned().collect();
    let code = |f: &str| {
        let c = without_inline_modules(&without_comments(&folder[f]));
        c.replace(&format!("crate::{name}::"), "super::")
    };
    let mod_code = folder.get("mod").map(|_| code("mod")).unwrap_or_default();
    let in_mod = defined(&mod_code);
    let mut graph = Graph::new();
    let mut problems = Vec::new();
    // mod.rs: everything but its face, each file's name as a path's first segment.
    let mut body = String::new();
    let mut in_face = false;
    for line in mod_code.lines() {
        in_face = in_face || face(line);
        if !in_face {
            body.push_str(line);
            body.push('\n');
        }
        in_face = in_face && !line.contains(';');
    }
    let mod_edges = graph.entry("mod".to_string()).or_default();
    for f in &files {
        let mut rest = body.as_str();
        while let Some(at) = find_word(rest, f) {
            let before = &rest[..at];
            let after = &rest[at + f.len()..];
            // `store::x` or `self::store::x`, not `other::store::x`.
            if after.starts_with("::") && (!before.ends_with("::") || before.ends_with("self::")) {
                mod_edges.insert(f.clone());
            }
            rest = after;
        }
    }
    for f in &files {
        let edges = graph.entry(f.clone()).or_default();
        for n in through_super(&code(f)) {
            if files.contains(&n) {
                if n != *f {
                    edges.insert(n);
                }
            } else if in_mod.contains(&n) {
                edges.insert("mod".to_string());
            } else {
                problems.push(format!(
                    "{name}/{f}.rs: super::{n} is neither a file of the folder nor defined in its mod.rs (a \
                     re-export hides the file it comes from): import it from that file"
                ));
            }
        }
    }
    if problems.is_empty() {
        Ok(graph)
    } else {
        Err(problems)
    }
}

/// A circle of `graph`, as the files along it (the first one again at the end), if it has one.
fn circle(graph: &Graph) -> Option<Vec<String>> {
    fn visit<'a>(
        f: &'a str,
        graph: &'a Graph,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| *p == f) {
            let mut c: Vec<String> = path[i..].iter().map(|p| format!("{p}.rs")).collect();
            c.push(format!("{f}.rs"));
            return Some(c);
        }
        if !done.insert(f) {
            return None;
        }
        path.push(f);
        for next in graph.get(f).into_iter().flatten() {
            if let Some(c) = visit(next, graph, path, done) {
                return Some(c);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    graph.keys().find_map(|f| visit(f, graph, &mut Vec::new(), &mut done))
}

/// Every folder of `src/` that is a module (has a `mod.rs`), with its files.
fn folders() -> BTreeMap<String, Folder> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = BTreeMap::new();
    for dir in std::fs::read_dir(&src).expect("src/").flatten().map(|e| e.path()) {
        if !dir.join("mod.rs").is_file() {
            continue;
        }
        let mut folder = Folder::new();
        for file in std::fs::read_dir(&dir).expect("a store folder").flatten().map(|e| e.path()) {
            if file.extension().is_some_and(|e| e == "rs") {
                let name = file.file_stem().unwrap().to_string_lossy().into_owned();
                folder.insert(name, std::fs::read_to_string(&file).expect("a source file"));
            }
        }
        out.insert(dir.file_name().unwrap().to_string_lossy().into_owned(), folder);
    }
    out
}

#[test]
fn no_folder_imports_in_a_circle() {
    let folders = folders();
    assert!(folders.len() >= 4, "found only {:?} under src/", folders.keys());
    let mut problems = Vec::new();
    let mut edges = 0;
    for (name, folder) in &folders {
        match graph(name, folder) {
            Ok(g) => {
                edges += g.values().map(BTreeSet::len).sum::<usize>();
                if let Some(c) = circle(&g) {
                    problems.push(format!("{name}: {}", c.join(" → ")));
                }
            }
            Err(p) => problems.extend(p),
        }
    }
    // Every store's sink imports its mod.rs and its audit side its sink: a parser that saw
    // nothing would pass every folder.
    assert!(edges >= 3 * folders.len(), "only {edges} imports seen in {} folders", folders.len());
    assert!(
        problems.is_empty(),
        "files of a store folder import each other in a circle: put what they share in the folder's mod.rs \
         (or a codec.rs that imports none of its siblings):\n{}",
        problems.join("\n")
    );
}

/// The check itself: it sees a circle through `mod.rs` items and through a group, does not take
/// a doc link, a test module or the folder's face for an import, and refuses a re-export.
#[test]
fn the_check_sees_a_circle_and_nothing_else() {
    let folder =
        |files: &[(&str, &str)]| -> Folder { files.iter().map(|(n, t)| (n.to_string(), t.to_string())).collect() };
    let face = "mod a;\n#[cfg(feature = \"x\")]\nmod b;\npub use a::A;\npub use b::{\n    B,\n};\nconst K: u8 = 1;\n";
    let fine = folder(&[
        ("mod", face),
        ("a", "use super::{b::B, K};\n/// Unlike [`super::c`].\npub struct A(B);\n"),
        ("b", "use super::K;\npub struct B;\n#[cfg(test)]\nmod tests {\n    use super::*;\n    use super::super::a::A;\n}\n"),
        ("c", "pub(super) fn c() { crate::x::a::f(); }\n"),
    ]);
    let g = graph("x", &fine).unwrap();
    assert_eq!(g["a"], ["b", "mod"].map(String::from).into());
    assert_eq!(g["b"], ["mod"].map(String::from).into());
    assert_eq!(g["c"], ["a"].map(String::from).into(), "crate::<folder>:: is the folder");
    assert!(g["mod"].is_empty(), "{g:?}");
    assert_eq!(circle(&g), None);

    let mut round = fine.clone();
    round.insert("b".into(), "use super::{\n    K,\n    c::c,\n};\n".into());
    round.insert("c".into(), "fn c() { super::a::f() }\n".into());
    assert_eq!(circle(&graph("x", &round).unwrap()).unwrap(), ["a.rs", "b.rs", "c.rs", "a.rs"]);

    let mut through_mod = fine.clone();
    through_mod.insert("mod".into(), format!("{face}fn k() -> u8 {{ b::k() }}\n"));
    through_mod.insert("b".into(), "use super::K;\n".into());
    assert_eq!(circle(&graph("x", &through_mod).unwrap()).unwrap(), ["b.rs", "mod.rs", "b.rs"]);

    let mut reexport = fine;
    reexport.insert("c".into(), "use super::A;\n".into());
    let problems = graph("x", &reexport).unwrap_err();
    assert!(problems[0].contains("x/c.rs: super::A"), "{problems:?}");
}
