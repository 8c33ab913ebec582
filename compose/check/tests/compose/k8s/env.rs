//! Every variable the manifests set read by its program, every needed one set, as compose sets it.

use super::*;

#[test]
fn every_variable_set_is_read_and_every_needed_one_is_set_as_in_compose() {
    let docs = docs();
    let c = compose();
    let mut problems = Vec::new();
    let mut run = BTreeSet::new();
    let mut differences_seen = BTreeSet::new();
    for d in &docs {
        let Some(pod) = pod_template(d) else { continue };
        for cont in containers(pod) {
            let at = format!("{} container {}", d.at(), cont["name"].as_str().unwrap_or("?"));
            let Some(bin) = program(cont) else {
                problems.push(format!("{at}: no command (the image has no entrypoint: command[0] is the program)"));
                continue;
            };
            let Some(wanted) = help_env(bin) else {
                problems.push(format!("{at}: runs {bin}, which is not one of {PROGRAMS:?}"));
                continue;
            };
            run.insert(bin);
            let env = container_env(&docs, cont, &at, &mut problems);
            let logging = reads_logging(bin);
            for (var, value) in &env {
                let read_by_it = wanted.contains_key(var) || (logging && LOGGING.contains(&var.as_str()));
                if !read_by_it {
                    problems.push(format!("{at}: sets {var}, which {bin} does not read"));
                }
                if let Some(v) = value.as_deref().filter(|v| points_at_itself(v)) {
                    problems.push(format!("{at}: {var}={v} points at the pod itself"));
                }
            }
            for (var, default) in wanted {
                let own = default.as_deref().filter(|d| points_at_itself(d));
                if let Some(d) = own {
                    if !env.contains_key(var) && !env.contains_key(&format!("{var}_FILE")) {
                        problems.push(format!(
                            "{at}: {var} (or {var}_FILE) is not set, and {bin}'s default {d} is the pod itself"
                        ));
                    }
                }
            }
            for (b, var, why) in NEEDED {
                if b == bin && !env.contains_key(var) {
                    problems.push(format!("{at}: {var} is not set: {why}"));
                }
            }
            // The same environment as compose's service, but for NOT_AS_COMPOSE.
            let service = PROGRAMS.iter().find(|(b, _)| *b == bin).map(|(_, s)| *s).expect("a program");
            for (var, composed) in env_of(&c, service) {
                let composed = interpolate(&scalar(composed));
                let here = env.get(var).cloned().flatten();
                if let Some(&(b, _, why)) =
                    NOT_AS_COMPOSE.iter().find(|(b, v, _)| (*b == bin || *b == "*") && *v == var.as_str())
                {
                    differences_seen.insert((b, var.clone()));
                    if here.as_deref() == Some(composed.as_str()) {
                        problems.push(format!("{at}: {var} is listed as not as compose ({why}) but equals it"));
                    }
                    continue;
                }
                match here {
                    Some(v) if v == composed => {}
                    Some(v) => problems.push(format!("{at}: {var}={v:?}, compose's {service} has {composed:?}")),
                    None if env.contains_key(var) => {} // from the pod itself: nothing to compare
                    None if env.contains_key(&format!("{var}_FILE")) => {} // a secret file here
                    None => problems.push(format!("{at}: {var} is not set; compose's {service} sets {composed:?}")),
                }
            }
            println!("{at}: {} variables, each read by {bin}", env.len());
        }
    }
    for (bin, _) in PROGRAMS {
        if !run.contains(bin) {
            problems.push(format!("no manifest runs {bin}"));
        }
    }
    for (b, var, why) in NOT_AS_COMPOSE {
        if !differences_seen.iter().any(|(sb, sv)| *sb == b && sv.as_str() == var) {
            problems.push(format!("NOT_AS_COMPOSE lists {b} {var} ({why}), but compose sets no such variable there"));
        }
    }
    assert!(
        problems.is_empty(),
        "{DIR}:\n{}\n(the variables come from the built binaries' --help: after changing a flag, \
         `cargo build --workspace` first)",
        problems.join("\n")
    );
}
