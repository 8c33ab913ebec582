//! The pipeline's image (every binary, a non-root user) and every image pinned.

use crate::env::PROGRAMS;
use crate::{compose, read, services};

#[test]
fn the_image_holds_every_workspace_binary_and_runs_as_a_user() {
    let df = read("compose/Dockerfile");
    assert!(df.contains("cargo build --release --locked --workspace --bins"), "the image must build every binary");
    assert!(
        df.contains("--mount=type=cache,target=/usr/local/cargo/registry"),
        "the cargo registry is a BuildKit cache mount"
    );
    assert!(df.contains("--mount=type=cache,target=/src/target"), "the build folder is a BuildKit cache mount");
    let last_from = df.rfind("\nFROM ").expect("a runtime stage");
    assert!(df[last_from..].contains("\nUSER "), "the runtime stage sets a non-root USER");
    let ignore = read(".dockerignore");
    for p in ["target", ".git", ".stack", "k6/out"] {
        assert!(ignore.lines().any(|l| l.trim_end_matches('/') == p), ".dockerignore lacks {p}");
    }
    let c = compose();
    for (_, service) in PROGRAMS {
        let s = &c["services"][service];
        assert_eq!(s["build"]["dockerfile"], "compose/Dockerfile", "{service} is built from compose/Dockerfile");
        assert_eq!(s["image"], c["services"]["writer"]["image"], "{service} shares the writer's image");
    }
}

/// An exact version (`1.2.3`, `v1.2.3`, `1.2.3-bookworm`) or a dated build (`bookworm-20251229-slim`).
fn exact_tag(tag: &str) -> bool {
    let t = tag.trim_start_matches('v');
    let version = t.split('-').next().unwrap_or("");
    let parts: Vec<_> = version.split('.').collect();
    let semver = parts.len() >= 3 && parts.iter().all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    let dated = t.split('-').any(|p| p.len() == 8 && p.bytes().all(|b| b.is_ascii_digit()));
    semver || dated
}

pub(crate) fn pinned(image: &str) -> Result<(), String> {
    let (name_tag, digest) = match image.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (image, None),
    };
    if let Some(d) = digest {
        let hex = d.strip_prefix("sha256:").ok_or(format!("{image}: digest is not sha256"))?;
        if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!("{image}: malformed digest"));
        }
    }
    let last = name_tag.rsplit('/').next().unwrap_or(name_tag);
    let Some((_, tag)) = last.split_once(':') else { return Err(format!("{image}: no tag")) };
    if !exact_tag(tag) {
        return Err(format!("{image}: tag {tag} is not an exact version"));
    }
    Ok(())
}

#[test]
fn every_image_is_pinned() {
    let c = compose();
    let mut problems = Vec::new();
    for (name, s) in services(&c) {
        if s.get("build").is_some() {
            continue; // the pipeline's own image, built from compose/Dockerfile
        }
        match s["image"].as_str() {
            Some(i) => {
                if let Err(e) = pinned(i) {
                    problems.push(format!("{name}: {e}"));
                }
                println!("{name}: {i}");
            }
            None => problems.push(format!("{name}: neither image nor build")),
        }
    }
    let df = read("compose/Dockerfile");
    for line in df.lines() {
        if let Some(v) = line.strip_prefix("ARG ").and_then(|a| a.split_once("_IMAGE=")).map(|(_, v)| v) {
            if let Err(e) = pinned(v) {
                problems.push(format!("compose/Dockerfile: {e}"));
            }
        }
        if let Some(from) = line.strip_prefix("FROM ") {
            let img = from.split_whitespace().next().unwrap_or("");
            if !img.starts_with("${") {
                if let Err(e) = pinned(img) {
                    problems.push(format!("compose/Dockerfile: {e}"));
                }
            }
        }
        if line.contains("cargo install") && !line.contains("--version") && !line.contains("--locked") {
            problems.push(format!("compose/Dockerfile: unpinned `{line}`"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The image builds with the toolchain CI builds with: compose/Dockerfile's default RUST_IMAGE
/// names rust-toolchain.toml's channel.
#[test]
fn the_image_and_ci_use_one_toolchain() {
    let toolchain = read("rust-toolchain.toml");
    let channel = toolchain
        .lines()
        .find_map(|l| l.trim().strip_prefix("channel = "))
        .map(|v| v.trim_matches('"').to_string())
        .expect("rust-toolchain.toml names a channel");
    let df = read("compose/Dockerfile");
    let image = df
        .lines()
        .find_map(|l| l.trim().strip_prefix("ARG RUST_IMAGE="))
        .expect("compose/Dockerfile has ARG RUST_IMAGE=");
    assert_eq!(image, format!("rust:{channel}-bookworm"), "compose/Dockerfile's RUST_IMAGE and rust-toolchain.toml");
}
