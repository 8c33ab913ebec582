//! Every manifest valid against the Kubernetes schemas of the pinned version.

use super::*;

#[test]
fn every_manifest_is_valid_against_the_kubernetes_schemas() {
    let files: Vec<String> = manifest_files().iter().map(|p| relative(p)).collect();
    let bin = kit::venv_bin("kubernetes-validate");
    let out = std::process::Command::new(&bin)
        .current_dir(root())
        .args(["--kubernetes-version", KUBERNETES_VERSION, "--strict"])
        .args(&files)
        .output()
        .unwrap_or_else(|e| panic!("{bin}: {e}"));
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    // Its errors, and any warning (a deprecated API, a version it has no schemas for): all fail.
    let said: Vec<&str> = text.lines().filter(|l| !l.starts_with("INFO ")).collect();
    assert!(
        out.status.success() && said.is_empty(),
        "kubernetes-validate --kubernetes-version {KUBERNETES_VERSION} --strict on {DIR} ({}):\n{}",
        out.status,
        if said.is_empty() { text.clone() } else { said.join("\n") }
    );
    // Every resource this test reads was validated, against the pinned version: a document the
    // validator skipped or parsed otherwise shows here.
    let minor = KUBERNETES_VERSION.rsplit_once('.').map_or(KUBERNETES_VERSION, |(m, _)| m);
    let mut validated = BTreeSet::new();
    for line in text.lines() {
        let rest = line.strip_prefix("INFO ").unwrap_or(line);
        let parsed = rest
            .split_once(" passed for resource ")
            .and_then(|(file, r)| Some((file, r.split_once(" against version ")?)));
        match parsed {
            Some((file, (resource, version))) if version == minor => {
                validated.insert(format!("{file} {resource}"));
            }
            _ => panic!("unexpected kubernetes-validate line (not passed against {minor}): {line}"),
        }
    }
    let expected: BTreeSet<String> =
        docs().iter().map(|d| format!("{} {}/{}", d.file, d.kind().to_lowercase(), d.name())).collect();
    assert_eq!(validated, expected, "the resources kubernetes-validate checked are not those of {DIR}");
    // The guide names the version the manifests were validated against.
    assert!(read(GUIDE).contains(&format!("Kubernetes {minor}")), "{GUIDE} does not say `Kubernetes {minor}`");
    println!(
        "{} resources in {} files valid against Kubernetes {KUBERNETES_VERSION} (strict)",
        expected.len(),
        files.len()
    );
}
