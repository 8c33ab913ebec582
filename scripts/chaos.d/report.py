"""Evidence → verdicts for scripts/chaos.

    report.py merge DIR          the id sets of one scenario (k6 runs, poison corpus)
                                 → DIR/expected-{accepted,uncertain,refused}.ids (exit 2 if
                                 `reconcile ids` refused a k6 log)
    report.py row DIR NAME       DIR/reconcile.json, events.tsv, monitor.jsonl, checks.tsv → DIR/row.json
    report.py progress DIR T     exit 0 once the pipeline recovered (see `recovery`) since epoch T
    report.py table OUT NAME...  the table of the rows, then the notes; exit 1 unless every verdict is
                                 exact and every other check passed

Events (events.tsv, written by scripts/chaos): `epoch <TAB> kind <TAB> label <TAB> arg`, kinds
fault-start, fault-end (arg = consume | produce: which progress ends the recovery), freeze-start,
freeze-end (label = store), need-backlog (the group must lag at that moment). Recovery after a fault-end at T (see `recovery`): seconds until every
partition that lagged at T had its committed offset move (consume), or until the topic's high
watermarks grew (produce).
"""
import glob
import json
import os
import sys

# The registry's stores (scripts/chaos exports `writer --list-stores` as PIPELINE_STORES).
STORES = tuple(os.environ["PIPELINE_STORES"].split())


# ------------------------------------------------------------------ merge
def merge(d):
    """The union of a scenario's id sets. A k6 run's ids come from the plain files `reconcile ids
    SUMMARY --write DIR/ids-TAG` wrote (reconcile reads the k6 log and checks it against its
    summary: the one reader of that format); poison ids come from poison-*.ids."""
    acc, unc, ref, sources, bad = set(), set(), set(), [], []
    into = {"accepted": acc, "uncertain": unc, "refused": ref}

    def plain(path, cls):
        with open(path) as f:
            ids = [l.strip() for l in f if l.strip()]
        into[cls].update(ids)
        sources.append({"file": path, cls: len(ids)})

    for s in sorted(glob.glob(os.path.join(d, "k6-*.json"))):
        tag = os.path.basename(s)[3:-5]
        written = [os.path.join(d, f"ids-{tag}.{cls}.ids") for cls in into]
        if all(os.path.exists(w) for w in written):
            for w, cls in zip(written, into):
                plain(w, cls)
        else:  # `reconcile ids` refused the log (its reason is in ids-TAG.json) or never ran
            bad.append(f"{s}: no id files from `reconcile ids` (see ids-{tag}.json)")
    for cls in into:
        p = os.path.join(d, f"poison-{cls}.ids")
        if os.path.exists(p):
            plain(p, cls)
    unc -= acc
    ref -= acc | unc
    for cls, ids in (("accepted", acc), ("uncertain", unc), ("refused", ref)):
        with open(os.path.join(d, f"expected-{cls}.ids"), "w") as f:
            f.write("".join(i + "\n" for i in sorted(ids)))
    out = {"accepted": len(acc), "uncertain": len(unc), "refused": len(ref), "sources": sources, "problems": bad}
    with open(os.path.join(d, "expected.json"), "w") as f:
        json.dump(out, f, indent=1)
    print(json.dumps({k: out[k] for k in ("accepted", "uncertain", "refused", "problems")}))
    return 2 if bad else 0


# ------------------------------------------------------------------ row
def load_samples(d):
    out = []
    p = os.path.join(d, "monitor.jsonl")
    if os.path.exists(p):
        with open(p) as f:
            for line in f:
                try:
                    s = json.loads(line)
                except ValueError:
                    continue
                if "committed" in s and "high" in s:  # a sample whose broker calls timed out has neither
                    s["C"], s["H"] = sum(s["committed"]), sum(s["high"])
                    s["lag"] = s["H"] - s["C"]
                    out.append(s)
    return out


def load_events(d):
    ev = []
    p = os.path.join(d, "events.tsv")
    if os.path.exists(p):
        with open(p) as f:
            for line in f:
                parts = line.rstrip("\n").split("\t") + ["", "", ""]
                ev.append((float(parts[0]), parts[1], parts[2], parts[3]))
    return ev


def at_or_before(samples, t):
    best = None
    for s in samples:
        if s["t"] <= t:
            best = s
        else:
            break
    return best or (samples[0] if samples else None)


def recovery(samples, t, kind):
    """Seconds after `t` until the pipeline moved again: `produce`, the topic's high watermarks grew;
    `consume`, EVERY partition that lagged at `t` had its committed offset move (a partition stuck
    behind a dead member counts even when the others progress) or had no lag left."""
    base = at_or_before(samples, t)
    if base is None:
        return None
    later = [s for s in samples if s["t"] > t]
    if kind == "produce":
        return next((s["t"] - t for s in later if s["H"] > base["H"]), None)
    worst = 0.0
    for p, (c0, h0) in enumerate(zip(base["committed"], base["high"])):
        if h0 - c0 <= 0:
            continue
        hit = next((s["t"] - t for s in later if s["committed"][p] > c0 or s["committed"][p] >= s["high"][p]), None)
        if hit is None:
            return None
        worst = max(worst, hit)
    return worst


def metric(sample, port, pred):
    m = sample["w"].get(port, {}) if sample else {}
    return sum(v for k, v in m.items() if pred(k))


def freeze_notes(samples, events):
    notes, checks = [], []
    starts = {e[2]: e[0] for e in events if e[1] == "freeze-start"}
    for store, t1 in starts.items():
        t2 = next((e[0] for e in events if e[1] == "freeze-end" and e[2] == store), None)
        if t2 is None:
            continue
        ports = sorted({p for s in samples for p in s["w"]})
        port = ports[0] if ports else None
        lab = f'"{store}"'
        fam = lambda name: (lambda k: k.startswith(name + "{") and lab in k)
        before = at_or_before(samples, t1)
        after = at_or_before(samples, t2 + 2)
        window = [s for s in samples if t1 <= s["t"] <= t2 + 2]
        pre = [s for s in samples if t1 - 5 <= s["t"] < t1]
        d = lambda name: metric(after, port, fam(name)) - metric(before, port, fam(name))
        retries, errors = d("writer_store_retries_total"), d("writer_store_errors_total")
        rejected, caller = d("writer_pool_rejected_total"), d("writer_pool_caller_runs_total")
        bucket = lambda le: (lambda k: k.startswith("writer_store_write_seconds_bucket{") and lab in k and f'le="{le}"' in k)
        slow = (metric(after, port, bucket("+Inf")) - metric(before, port, bucket("+Inf"))) - (
            metric(after, port, bucket("1")) - metric(before, port, bucket("1")))
        qmax = max((metric(s, port, fam("writer_pool_queue_depth")) for s in window), default=0)
        qpre = max((metric(s, port, fam("writer_pool_queue_depth")) for s in pre), default=0)
        amax = max((metric(s, port, fam("writer_pool_active_workers")) for s in window), default=0)
        lag_pre = max((s["lag"] for s in pre), default=0)
        lag_peak = max((s["lag"] for s in window), default=0)
        back = next((s["t"] - t2 for s in samples if s["t"] > t2 and s["lag"] <= lag_pre), None)
        moved = retries + errors + rejected + caller + slow > 0 or qmax > qpre
        notes.append(
            f"freeze {store} {t2 - t1:.0f} s: /metrics during the freeze: retries +{retries:.0f}, errors +{errors:.0f}, "
            f"pool rejected +{rejected:.0f}, caller-runs +{caller:.0f}, queue depth max {qmax:.0f} (before {qpre:.0f}), "
            f"active workers max {amax:.0f}, {store} writes over 1 s +{slow:.0f}; lag {lag_pre} before → peak {lag_peak} → back to ≤{lag_pre} "
            + (f"{back:.1f} s after SIGCONT" if back is not None else "NEVER"))
        checks.append(("ok" if moved else "FAIL", f"freeze-{store}: /metrics moved during the freeze",
                       "" if moved else "no retry, error, rejection, caller-run, queue growth or slow write seen"))
        checks.append(("ok" if back is not None else "FAIL", f"freeze-{store}: backlog drained after SIGCONT",
                       "" if back is not None else f"lag never returned to {lag_pre}"))
    return notes, checks


def row(d, name):
    r = {"scenario": name, "faults": "", "accepted": None, "lost": None, "duplicated": None,
         "uncertain_stored": None, "uncertain_not_stored": None, "recover_max_s": None, "verdict": "", "notes": []}
    p = os.path.join(d, "faults.txt")
    if os.path.exists(p):
        r["faults"] = open(p).read().strip()
    failures = []  # the id-level verdict's reasons
    rec = None
    p = os.path.join(d, "reconcile.json")
    if os.path.exists(p):
        try:
            rec = json.loads(open(p).read().strip().splitlines()[-1])
        except (ValueError, IndexError):
            rec = None
    if rec is None:
        if os.path.exists(os.path.join(d, "reconcile.rc")):
            p = os.path.join(d, "reconcile.err")
            err = open(p).read().strip().splitlines()[-1:] if os.path.exists(p) else []
            failures.append(f"reconcile produced no JSON: {' '.join(err)[:300]}")
        else:
            failures.append("not reconciled (the scenario was aborted)")
    elif rec.get("drained") is False:
        lag = ", ".join(f"p{x['partition']} {x['committed']}/{x['high']}" for x in rec.get("lagging", []))
        failures.append(f"NOT DRAINED ({lag})")
    elif rec.get("error"):
        failures.append(f"reconcile: {rec.get('error')}: {rec.get('detail', '')[:200]}")
    else:
        cl = rec.get("classes", {})
        tot = lambda k: cl.get(k, {}).get("total", 0)
        r["accepted"] = (rec.get("expected") or {}).get("accepted")
        lost = {s: tot(f"missing from {s}") for s in STORES}
        dup = {s: tot(f"duplicated ({s})") for s in STORES}
        r["lost"] = max(lost.values()) + tot("dead-lettered (accepted)")
        r["lost_by_store"] = lost
        r["duplicated"] = max(dup.values())
        r["dup_by_store"] = dup
        r["uncertain_stored"] = tot("uncertain, stored")
        r["uncertain_not_stored"] = tot("uncertain, not stored")
        r["dead_letters"] = (rec.get("dead_letters") or {}).get("records")
        if rec.get("check") != "ids":
            failures.append(f"checked at {rec.get('check')} level, not ids")
        for k, c in cl.items():
            if c.get("failure") and c.get("total"):
                ex = ", ".join(c.get("examples", [])[:3])
                failures.append(f"{k} {c['total']} (e.g. {ex})")
    samples, events = load_samples(d), load_events(d)
    recs = []
    starts = [e[0] for e in events if e[1] == "fault-start"]
    for t, kind, label, arg in events:
        if kind == "fault-end":
            x = recovery(samples, t, arg or "consume")
            nxt = next((s for s in starts if s > t), None)
            recs.append({"fault": label, "progress": arg, "recover_s": x,
                         "next_fault_first": x is not None and nxt is not None and nxt < t + x})
            if x is None:
                failures.append(f"no progress after {label}")
    r["recoveries"] = recs
    if len(recs) > 1:
        r["notes"].append("recovery per fault (s): " + ", ".join(
            f"{x['fault']} {'-' if x['recover_s'] is None else round(x['recover_s'], 1)}{'*' if x['next_fault_first'] else ''}"
            for x in recs) + (" (* = the next fault came first)" if any(x["next_fault_first"] for x in recs) else ""))
    vals = [x["recover_s"] for x in recs if x["recover_s"] is not None]
    r["recover_max_s"] = round(max(vals), 1) if vals else None
    notes, fchecks = freeze_notes(samples, events)
    r["notes"].extend(notes)
    checks = list(fchecks)
    for t, kind, label, _ in events:
        if kind == "lag":
            sm = at_or_before(samples, t)
            r["notes"].append(f"lag at {label}: {sm['lag'] if sm else '?'} records")
        if kind == "need-backlog":
            s = at_or_before(samples, t)
            lag = s["lag"] if s else None
            r["notes"].append(f"lag at {label}: {lag} records (committed {s['C'] if s else '?'} of {s['H'] if s else '?'})")
            checks.append(("ok" if lag else "FAIL", f"a backlog at {label}",
                           "" if lag else "the backlog had drained already: make it bigger"))
    if rec is not None and (rec.get("dead_letters") or {}).get("records"):
        checks.append(("FAIL", "no dead letters", f"{rec['dead_letters']['records']} records in {rec['dead_letters'].get('topic')}"))
    p = os.path.join(d, "checks.tsv")
    if os.path.exists(p):
        for line in open(p):
            parts = line.rstrip("\n").split("\t") + ["", ""]
            checks.append((parts[0], parts[1], parts[2]))
    p = os.path.join(d, "notes.txt")
    if os.path.exists(p):
        r["notes"].extend(l.strip() for l in open(p) if l.strip())
    r["checks"] = [{"ok": c[0] == "ok", "check": c[1], "detail": c[2]} for c in checks]
    failed_checks = [f"{c[1]}: {c[2]}" if c[2] else c[1] for c in checks if c[0] != "ok"]
    r["failures"] = failures + failed_checks
    # The verdict is the id-level reconcile's; the other checks of the scenario (processes alive,
    # exit codes, metrics moved, backlog drained, poison expectations...) are counted apart.
    r["verdict"] = "exact" if not failures else ("NOT EXACT" if rec is not None and "classes" in rec else "NO VERDICT")
    r["checks_ok"] = not failed_checks
    r["checks_summary"] = f"{len(checks)} ok" if not failed_checks else f"{len(failed_checks)} of {len(checks)} FAILED"
    with open(os.path.join(d, "row.json"), "w") as f:
        json.dump(r, f, indent=1)
    return 0 if not failures else 1


# ------------------------------------------------------------------ table
def fmt(v, by=None):
    if v is None:
        return "?"
    if v and by:
        return f"{v} (" + " ".join(f"{s} {n}" for s, n in by.items() if n) + ")"
    return str(v)


def table(out, names):
    rows = []
    for n in names:
        p = os.path.join(out, n, "row.json")
        rows.append(json.load(open(p)) if os.path.exists(p) else
                    {"scenario": n, "faults": "(did not run to the end)", "verdict": "NO VERDICT", "failures": ["no row"], "notes": []})
    head = ["scenario", "faults injected", "202s", "lost", "duplicated", "uncertain stored/not", "max recover s",
            "id-level verdict", "other checks"]
    body = []
    for r in rows:
        rm = r.get("recover_max_s")
        body.append([r["scenario"], r.get("faults", ""), fmt(r.get("accepted")), fmt(r.get("lost"), r.get("lost_by_store")),
                     fmt(r.get("duplicated"), r.get("dup_by_store")),
                     f"{fmt(r.get('uncertain_stored'))} / {fmt(r.get('uncertain_not_stored'))}",
                     "-" if rm is None else f"{rm:.1f}", r.get("verdict", ""), r.get("checks_summary", "?")])
    w = [max(len(str(x[i])) for x in body + [head]) for i in range(len(head))]
    line = lambda cells: "| " + " | ".join(str(c).ljust(w[i]) for i, c in enumerate(cells)) + " |"
    print(line(head))
    print("|" + "|".join("-" * (x + 2) for x in w) + "|")
    for b in body:
        print(line(b))
    for r in rows:
        extra = r.get("notes", []) + [f"FAILED: {f}" for f in r.get("failures", [])]
        for x in extra:
            print(f"  {r['scenario']}: {x}")
    return 0 if all(r.get("verdict") == "exact" and r.get("checks_ok") for r in rows) else 1


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "merge":
        sys.exit(merge(sys.argv[2]))
    if cmd == "row":
        sys.exit(row(sys.argv[2], sys.argv[3]))
    if cmd == "progress":  # progress DIR T: exit 0 once every partition lagging at T has moved
        x = recovery(load_samples(sys.argv[2]), float(sys.argv[3]), "consume")
        sys.exit(0 if x is not None else 1)
    if cmd == "table":
        sys.exit(table(sys.argv[2], sys.argv[3:]))
    sys.exit(__doc__)
