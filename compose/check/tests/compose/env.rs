//! Every variable the programs read set in their services, with the programs' own defaults.

use crate::{compose, env_of, interpolate, scalar, COMPOSE};
use pipeline_testkit as kit;
use std::collections::BTreeMap;

/// (variable, clap default) of every flag of `bin` (and of its subcommands), from `--help`.
pub(crate) fn program_env(bin: &str) -> BTreeMap<String, Option<String>> {
    let help = |args: &[&str]| {
        let out = std::process::Command::new(kit::bin_path(bin))
            .args(args)
            .env_clear() // clap prints an env var's current value; we want the defaults
            .output()
            .unwrap_or_else(|e| panic!("{bin} --help: {e}"));
        assert!(out.status.success(), "{bin} {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).expect("help is UTF-8")
    };
    let top = help(&["--help"]);
    let mut texts = vec![top.clone()];
    // Subcommands (reconcile count, diff, ...) may add flags of their own.
    if let Some(cmds) = top.split("Commands:\n").nth(1) {
        for line in cmds.lines().take_while(|l| l.starts_with("  ")) {
            let name = line.split_whitespace().next().unwrap_or("");
            if !name.is_empty() && name != "help" {
                texts.push(help(&[name, "--help"]));
            }
        }
    }
    let mut out = BTreeMap::new();
    for text in texts {
        // One block per flag: from a line starting with `-`/`--` to the next one.
        let mut blocks: Vec<String> = Vec::new();
        for line in text.lines() {
            if line.trim_start().starts_with('-') {
                blocks.push(String::new());
            }
            if let Some(b) = blocks.last_mut() {
                b.push_str(line);
                b.push('\n');
            }
        }
        for b in blocks {
            // `[env: NAME=value]`, or `[env: NAME]` for a flag that hides its value (a secret).
            let Some(env) = b.split("[env: ").nth(1).and_then(|s| s.split(['=', ']']).next()) else { continue };
            // clap quotes an empty default (`[default: ""]`): that is the empty string.
            let default = b.split("[default: ").nth(1).and_then(|s| s.split(']').next()).map(|d| {
                if d == "\"\"" {
                    String::new()
                } else {
                    d.to_string()
                }
            });
            out.insert(env.to_string(), default);
        }
    }
    assert!(!out.is_empty(), "{bin} --help lists no [env: ...]: has its help format changed?");
    out
}

/// The programs of the image and the service running each.
pub(crate) const PROGRAMS: [(&str, &str); 3] = [("writer", "writer"), ("ingest", "ingest"), ("reconcile", "reconcile")];

#[test]
fn every_variable_the_programs_read_is_set_with_their_default() {
    let c = compose();
    let mut problems = Vec::new();
    for (bin, service) in PROGRAMS {
        let env = env_of(&c, service);
        let wanted = program_env(bin);
        for (var, default) in &wanted {
            // `X_FILE` is the file twin of a secret flag `X`, set only where a secret file is used.
            if var.ends_with("_FILE") {
                continue;
            }
            // A secret flag may be given by its file twin instead (a compose secret).
            if !env.contains_key(var) && env.contains_key(&format!("{var}_FILE")) {
                continue;
            }
            let Some(v) = env.get(var) else {
                problems.push(format!("{service}: {var} is not set (the {bin} reads it; default {default:?})"));
                continue;
            };
            let v = scalar(v);
            // `${VAR:-d}`: passed through from the host, and d must be the program's own default.
            if let Some(d) = v.strip_prefix(&format!("${{{var}:-")).and_then(|s| s.strip_suffix('}')) {
                // `${VAR:-}` for a flag without a default: unset unless the host sets it.
                if Some(d) != default.as_deref() && !(d.is_empty() && default.is_none()) {
                    problems.push(format!("{service}: {var} defaults to {d:?} here but to {default:?} in {bin}"));
                }
            }
            let resolved = interpolate(&v);
            if resolved.contains("127.0.0.1") || resolved.contains("localhost") {
                problems.push(format!("{service}: {var}={resolved} points at the container itself"));
            }
        }
        println!("{service}: all {} variables {bin} reads are set", wanted.len());
    }
    assert!(
        problems.is_empty(),
        "{COMPOSE}:\n{}\n(the variables come from the built binaries' --help: after changing a flag, \
         `cargo build --workspace` first — `cargo test --workspace` does)",
        problems.join("\n")
    );
}
