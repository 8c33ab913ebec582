//! Every pod hardened, with resources, disruption budgets and Services that select it.

use super::*;

#[test]
fn every_pod_runs_hardened_with_resources_budgets_and_services() {
    let docs = docs();
    let compose_file = compose();
    // The image compose builds, and the user it runs as (compose/Dockerfile's `USER uid:gid`).
    let image = interpolate(&scalar(&compose_file["services"]["writer"]["image"]));
    let dockerfile = read("compose/Dockerfile");
    let user = dockerfile.lines().find_map(|l| l.strip_prefix("USER ")).expect("compose/Dockerfile has a USER line");
    let uid: i64 = user.split(':').next().and_then(|u| u.trim().parse().ok()).expect("USER is numeric");
    let mut problems = Vec::new();
    for d in &docs {
        let at = d.at();
        if d.kind() == "Namespace" {
            if d.name() != NAMESPACE || d.v["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] != "restricted"
            {
                problems.push(format!("{at}: the namespace is {NAMESPACE}, with Pod Security `restricted` enforced"));
            }
        } else if d.v["metadata"]["namespace"] != NAMESPACE {
            problems.push(format!("{at}: not in namespace {NAMESPACE}"));
        }
        let Some(pod) = pod_template(d) else { continue };
        let spec = &pod["spec"];
        // No API token (the programs never call the API server) and no Service link variables
        // (the environment is what the manifests write, which the variables test checks).
        if spec["automountServiceAccountToken"] != false || spec["enableServiceLinks"] != false {
            problems.push(format!("{at}: automountServiceAccountToken and enableServiceLinks must be false"));
        }
        let ps = &spec["securityContext"];
        for c in containers(pod) {
            let at = format!("{at} container {}", c["name"].as_str().unwrap_or("?"));
            let cs = &c["securityContext"];
            let eff = |k: &str| if cs[k].is_null() { ps[k].clone() } else { cs[k].clone() };
            if c["image"] != image.as_str() {
                problems.push(format!("{at}: image {}, not compose's {image}", c["image"]));
            }
            if eff("runAsNonRoot") != true || eff("runAsUser") != uid {
                problems.push(format!("{at}: must run as non-root uid {uid} (compose/Dockerfile's USER)"));
            }
            if eff("seccompProfile")["type"] != "RuntimeDefault" {
                problems.push(format!("{at}: seccompProfile must be RuntimeDefault"));
            }
            if cs["readOnlyRootFilesystem"] != true || cs["allowPrivilegeEscalation"] != false {
                problems.push(format!("{at}: readOnlyRootFilesystem true and allowPrivilegeEscalation false"));
            }
            if cs["capabilities"]["drop"] != serde_json::json!(["ALL"]) || !cs["capabilities"]["add"].is_null() {
                problems.push(format!("{at}: capabilities must drop ALL and add none"));
            }
            if cs["privileged"] == true {
                problems.push(format!("{at}: privileged"));
            }
            for (kind, res) in [("requests", "cpu"), ("requests", "memory"), ("limits", "cpu"), ("limits", "memory")] {
                if c["resources"][kind][res].is_null() {
                    problems.push(format!("{at}: no resources.{kind}.{res}"));
                }
            }
        }
        if !long_running(d) {
            continue;
        }
        // A controller whose selector does not select its own template is refused by the API
        // server, which the schemas cannot see.
        let labels = &pod["metadata"]["labels"];
        if !selects(&d.v["spec"]["selector"]["matchLabels"], labels) {
            problems.push(format!("{at}: spec.selector does not select the pod template's labels"));
        }
        let budgets: Vec<&Doc> = docs
            .iter()
            .filter(|b| b.kind() == "PodDisruptionBudget" && selects(&b.v["spec"]["selector"]["matchLabels"], labels))
            .collect();
        if budgets.len() != 1 {
            problems.push(format!("{at}: {} PodDisruptionBudgets select it, not one", budgets.len()));
        }
    }
    // Every autoscaler scales a workload of the manifests, on CPU; the ingest has one.
    for h in docs.iter().filter(|h| h.kind() == "HorizontalPodAutoscaler") {
        let target = &h.v["spec"]["scaleTargetRef"];
        let Some(w) = docs.iter().find(|w| w.kind() == target["kind"] && w.name() == target["name"]) else {
            problems.push(format!("{}: scales {target}, which no manifest defines", h.at()));
            continue;
        };
        // `replicas` in a scaled workload resets the autoscaler's count on every apply.
        if !w.v["spec"]["replicas"].is_null() {
            problems.push(format!("{}: sets replicas, which {} owns", w.at(), h.at()));
        }
        if !list(&h.v["spec"]["metrics"]).iter().any(|m| m["resource"]["name"] == "cpu") {
            problems.push(format!("{}: does not scale on CPU", h.at()));
        }
    }
    let scaled = |bin: &str| {
        program_containers(&docs).iter().any(|(w, _, _, b)| {
            *b == bin
                && docs
                    .iter()
                    .any(|h| h.kind() == "HorizontalPodAutoscaler" && h.v["spec"]["scaleTargetRef"]["name"] == w.name())
        })
    };
    if !scaled("ingest") {
        problems.push("no HorizontalPodAutoscaler scales the ingest".into());
    }
    // Every Service selects the pods of one workload and sends each port to a port they declare.
    for s in docs.iter().filter(|s| s.kind() == "Service") {
        let selected: Vec<(&Doc, &Json)> = docs
            .iter()
            .filter_map(|w| Some((w, pod_template(w)?)))
            .filter(|(_, pod)| selects(&s.v["spec"]["selector"], &pod["metadata"]["labels"]))
            .collect();
        let [(_, pod)] = selected.as_slice() else {
            problems.push(format!("{}: selects {} workloads, not one", s.at(), selected.len()));
            continue;
        };
        let declared: Vec<Json> = containers(pod).flat_map(|c| list(&c["ports"]).to_vec()).collect();
        for p in list(&s.v["spec"]["ports"]) {
            let target = if p["targetPort"].is_null() { &p["port"] } else { &p["targetPort"] };
            if resolve_port(target, &declared).is_none_or(|n| !declared.iter().any(|d| d["containerPort"] == n)) {
                problems.push(format!(
                    "{}: port {} goes to {target}, which the pods do not declare",
                    s.at(),
                    p["port"]
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{DIR}:\n{}", problems.join("\n"));
}
