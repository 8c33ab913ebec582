//! Every relative link and image in the repository's Markdown resolves: the file or folder
//! exists, and a `#fragment` names a heading of the page it points to (GitHub's anchors).
//!
//! Hand-written on top of pulldown-cmark rather than lychee: lychee's offline mode checks files
//! but not fragments against headings, and building it costs minutes of the suite's two cores
//! for the few dozen lines here. External links (`https:` and the like) are not checked: the
//! machines that run this reach no web.

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    pipeline_testkit::docs::repo_root()
}

/// Every committed (or added) Markdown file, from `git ls-files`.
fn markdown_files() -> Vec<PathBuf> {
    let out = std::process::Command::new("git")
        .args(["ls-files", "--cached", "--others", "--exclude-standard", "*.md"])
        .current_dir(root())
        .output()
        .expect("git ls-files");
    assert!(out.status.success(), "git ls-files failed");
    String::from_utf8_lossy(&out.stdout).lines().map(|l| root().join(l)).filter(|p| p.exists()).collect()
}

/// The anchors GitHub gives a page's headings: the text lowercased, everything but letters,
/// digits, spaces, `-` and `_` dropped, spaces turned into `-`; a repeated one gets `-1`, `-2`.
fn anchors(text: &str) -> HashSet<String> {
    let mut out = HashSet::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut heading: Option<String> = None;
    for event in Parser::new_ext(text, Options::all()) {
        match event {
            Event::Start(Tag::Heading { .. }) => heading = Some(String::new()),
            Event::Text(t) | Event::Code(t) => {
                if let Some(h) = heading.as_mut() {
                    h.push_str(&t);
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                if let Some(h) = heading.take() {
                    let slug: String = h
                        .to_lowercase()
                        .chars()
                        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
                        .map(|c| if c == ' ' { '-' } else { c })
                        .collect();
                    let n = seen.entry(slug.clone()).or_insert(0);
                    out.insert(if *n == 0 { slug.clone() } else { format!("{slug}-{n}") });
                    *n += 1;
                }
            }
            _ => {}
        }
    }
    // Explicit HTML anchors (`<a id="...">`, `<a name="...">`) count too.
    for marker in ["id=\"", "name=\""] {
        for part in text.split(marker).skip(1) {
            if let Some(end) = part.find('"') {
                out.insert(part[..end].to_string());
            }
        }
    }
    out
}

/// The relative links and images of one page.
fn links(text: &str) -> Vec<String> {
    Parser::new_ext(text, Options::all())
        .filter_map(|e| match e {
            Event::Start(Tag::Link { dest_url, .. }) | Event::Start(Tag::Image { dest_url, .. }) => {
                Some(dest_url.to_string())
            }
            _ => None,
        })
        .filter(|u| !u.contains("://") && !u.starts_with("mailto:"))
        .collect()
}

fn broken(page: &Path, link: &str, cache: &mut HashMap<PathBuf, HashSet<String>>) -> Option<String> {
    let (path, fragment) = match link.split_once('#') {
        Some((p, f)) => (p, Some(f)),
        None => (link, None),
    };
    let target = if path.is_empty() {
        page.to_path_buf()
    } else if let Some(abs) = path.strip_prefix('/') {
        root().join(abs)
    } else {
        page.parent().unwrap_or(Path::new(".")).join(path)
    };
    if !target.exists() {
        return Some(format!("{link}: no such file"));
    }
    let fragment = fragment.filter(|f| !f.is_empty())?;
    if target.extension().is_none_or(|e| e != "md") {
        // Line anchors of source files (`#L10`) are GitHub's; nothing to check offline.
        return None;
    }
    let canonical = target.canonicalize().unwrap_or(target.clone());
    let known =
        cache.entry(canonical).or_insert_with(|| anchors(&std::fs::read_to_string(&target).unwrap_or_default()));
    (!known.contains(fragment)).then(|| format!("{link}: no heading with the anchor #{fragment}"))
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    let files = markdown_files();
    assert!(files.len() > 10, "found only {} Markdown files: is this the repository?", files.len());
    let mut cache = HashMap::new();
    let mut bad = Vec::new();
    for page in &files {
        let text = std::fs::read_to_string(page).expect("read page");
        for link in links(&text) {
            if let Some(why) = broken(page, &link, &mut cache) {
                bad.push(format!("{}: {why}", page.strip_prefix(root()).unwrap_or(page).display()));
            }
        }
    }
    assert!(bad.is_empty(), "{} broken links:\n{}", bad.len(), bad.join("\n"));
}

#[test]
fn anchors_follow_githubs_rules() {
    let a = anchors("# The ingest's HTTP API\n## `POST /v1/messages`\n## A, b & c\n## A, b & c\n");
    for want in ["the-ingests-http-api", "post-v1messages", "a-b--c", "a-b--c-1"] {
        assert!(a.contains(want), "{want} not in {a:?}");
    }
}
