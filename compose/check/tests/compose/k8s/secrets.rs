//! Every secret a file the guide creates.

use super::*;

#[test]
fn every_secret_is_a_file_the_guide_creates() {
    let docs = docs();
    let mut ignored = Vec::new();
    let mut problems = Vec::new();
    let mut mounted: BTreeSet<(String, String)> = BTreeSet::new();
    for (d, pod, c, bin) in program_containers(&docs) {
        let at = format!("{} container {}", d.at(), c["name"].as_str().unwrap_or("?"));
        let env = container_env(&docs, c, &at, &mut ignored);
        let volumes = list(&pod["spec"]["volumes"]);
        // (file path in the container, secret, key) of every secret file mounted in it.
        let mut files: Vec<(String, String, String)> = Vec::new();
        for m in list(&c["volumeMounts"]) {
            let Some(v) = volumes.iter().find(|v| v["name"] == m["name"]) else {
                problems.push(format!("{at}: mounts volume {}, which the pod does not define", m["name"]));
                continue;
            };
            let sources: Vec<(&Json, &Json)> = if let Some(name) = v["secret"].get("secretName") {
                vec![(name, &v["secret"])]
            } else {
                list(&v["projected"]["sources"])
                    .iter()
                    .filter(|s| !s["secret"].is_null())
                    .map(|s| (&s["secret"]["name"], &s["secret"]))
                    .collect()
            };
            for (name, secret) in sources {
                // A subPath mount is never updated: a rotated key or password would not arrive.
                if m.get("subPath").is_some() {
                    problems.push(format!("{at}: secret {name} mounted with subPath: rotations never reach it"));
                }
                if secret["optional"] == true {
                    problems.push(format!("{at}: secret {name} is optional: the program would start without it"));
                }
                let items = list(&secret["items"]);
                if items.is_empty() {
                    problems.push(format!("{at}: secret {name} mounted whole: list the keys {bin} reads (items)"));
                }
                for i in items {
                    let dir = m["mountPath"].as_str().unwrap_or_default().trim_end_matches('/');
                    let path = format!("{dir}/{}", i["path"].as_str().unwrap_or_default());
                    files.push((path, scalar(name), scalar(&i["key"])));
                }
            }
        }
        // Every file variable names a mounted secret file, and every one mounted is read.
        let file_vars: Vec<(&String, String)> = env
            .iter()
            .filter(|(var, _)| var.ends_with("_FILE") || PATH_VARIABLES.contains(&var.as_str()))
            .map(|(var, v)| (var, v.clone().unwrap_or_default()))
            .collect();
        for (var, path) in &file_vars {
            match files.iter().find(|(p, _, _)| p == path) {
                Some((_, secret, key)) => {
                    mounted.insert((secret.clone(), key.clone()));
                }
                None => problems.push(format!("{at}: {var}={path} is no secret file mounted in the container")),
            }
        }
        for (path, secret, key) in &files {
            if !file_vars.iter().any(|(_, p)| p == path) {
                problems.push(format!(
                    "{at}: secret {secret} key {key} is mounted at {path}, which {bin} is not told to read"
                ));
            }
        }
    }
    // The guide's `kubectl create secret generic NAME --from-file=KEY=PATH ...` commands.
    let guide = read(GUIDE).replace("\\\n", " ");
    let mut created = BTreeSet::new();
    for line in guide.lines() {
        let Some(rest) = line.split("create secret generic ").nth(1) else { continue };
        let mut words = rest.split_whitespace();
        let name = words.next().unwrap_or_default().to_string();
        for w in words {
            if let Some(f) = w.strip_prefix("--from-file=") {
                let key = f.split_once('=').map_or_else(|| f.rsplit('/').next().unwrap_or(f), |(k, _)| k);
                created.insert((name.clone(), key.to_string()));
            }
        }
    }
    let missing: Vec<_> = mounted.difference(&created).collect();
    let unused: Vec<_> = created.difference(&mounted).collect();
    if !missing.is_empty() {
        problems.push(format!("{GUIDE} does not create these (secret, key), which pods mount: {missing:?}"));
    }
    if !unused.is_empty() {
        problems.push(format!("{GUIDE} creates these (secret, key), which no pod mounts: {unused:?}"));
    }
    assert!(problems.is_empty(), "{DIR}:\n{}", problems.join("\n"));
    println!("secret files: {mounted:?}");
}
