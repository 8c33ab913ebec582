//! Generated documentation kept equal to the code: a page, or a marked block of a page, is
//! rendered by a test and compared with what is committed. `UPDATE_DOCS=1` makes the same
//! test write it instead (then review the diff and commit it).

use std::path::{Path, PathBuf};

/// The repository's root (the workspace folder).
pub fn repo_root() -> PathBuf {
    let mut dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    while !dir.join(".git").exists() && !dir.join("Cargo.lock").exists() {
        if !dir.pop() {
            break;
        }
    }
    dir
}

fn update() -> bool {
    std::env::var_os("UPDATE_DOCS").is_some()
}

fn drifted(rel: &str, what: &str) -> ! {
    panic!("{rel}: {what} differs from the code that generates it; run the same test with UPDATE_DOCS=1 and commit the result")
}

/// The whole file at `rel` (from the repository's root) must be `content`.
pub fn generated_file(rel: &str, content: &str) {
    let path = repo_root().join(rel);
    let current = std::fs::read_to_string(&path).unwrap_or_default();
    if current == content {
        return;
    }
    if update() {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).expect("docs folder");
        }
        std::fs::write(&path, content).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        return;
    }
    drifted(rel, "the file");
}

/// The block of the file at `rel` between `<!-- NAME:begin ... -->` and `<!-- NAME:end -->`
/// must be `content` (a blank line on each side is added).
pub fn generated_block(rel: &str, name: &str, content: &str) {
    let path = repo_root().join(rel);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let (begin, end) = (format!("<!-- {name}:begin"), format!("<!-- {name}:end -->"));
    let (Some(b), Some(e)) = (text.find(&begin), text.find(&end)) else {
        panic!("{rel} has no generated block {begin} … {end}");
    };
    let Some(b_end) = text[b..].find("-->").map(|i| b + i + 3) else { panic!("{rel}: {begin} is not closed") };
    let want = format!("\n\n{}\n", content.trim_end());
    if text[b_end..e] == want {
        return;
    }
    if update() {
        let new = format!("{}{want}{}", &text[..b_end], &text[e..]);
        std::fs::write(&path, new).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        return;
    }
    drifted(rel, &format!("the block {name}"));
}

/// Whether `path` exists under the repository's root.
pub fn exists(rel: &str) -> bool {
    Path::new(&repo_root().join(rel)).exists()
}
