// What every script shares: the measured metrics (warm-up excluded), the boot-id check, the
// thresholds, the id log (lib/ids.js) and the JSON summary that `reconcile --expect-from` reads.
import http from 'k6/http';
import { Counter, Rate, Trend } from 'k6/metrics';
import exec from 'k6/execution';
import { setting, durationSetting, MEASURED, scriptNameOf } from './config.js';
import { IDS_FILE, FORMAT, classOf, logIds, newRun, logRun, logEnd } from './ids.js';

export const BASE = setting('INGEST_URL');
// Where the ingest answers /healthz: its admin listener when it has one (--admin-listen).
const ADMIN = __ENV.INGEST_ADMIN_URL || BASE;
export const OUT = setting('SUMMARY_FILE');

// Messages by answer, warm-up included (warm-up messages are stored too). `accepted` is what
// every store must hold; `uncertain` ones may be stored (at most once); `refused` never.
export const accepted = new Counter('accepted_messages');
export const uncertain = new Counter('uncertain_messages');
export const refused = new Counter('refused_messages');
// Measured phase only.
export const measuredRequests = new Counter('measured_requests');
export const measuredMessages = new Counter('measured_messages');
export const measuredErrors = new Rate('measured_errors');
export const measuredLatency = new Trend('measured_latency', true);
export const bootChanged = new Counter('boot_id_changed');
const statusCounters = {};
for (const s of ['0', '400', '404', '413', '415', '422', '500', '502', '503', '504']) {
  statusCounters[s] = new Counter(`status_${s}`);
}
const otherStatus = new Counter('status_other');
const byClass = { A: accepted, U: uncertain, R: refused };

// A soak (`experiment soak`): WINDOW (e.g. 1m) splits the measured phase into windows, each with
// its own latency and error rate in the summary's `windows`, so a drift over hours shows. Each
// window is a sub-metric tagged `w`; k6 keeps a sub-metric only when a threshold names it, hence
// the always-true thresholds below (on `max` and `rate`, which k6 keeps without sorting samples).
// The verdict compares the first and the last EDGE windows (10 minutes, or a third of a shorter
// soak) by p99 over all their requests, so each request is also tagged with its part.
const WINDOW = __ENV.WINDOW ? durationSetting('WINDOW') : null;
const WINDOWS = WINDOW ? Math.ceil(MEASURED.secs / WINDOW.secs) : 0;
const EDGE = WINDOWS ? Math.max(1, Math.min(Math.ceil(600 / WINDOW.secs), Math.floor(WINDOWS / 3))) : 0;
const partOf = (w) => (w < EDGE ? 'first' : w >= WINDOWS - EDGE ? 'last' : 'middle');
const windowLatency = new Trend('window_latency', true);
const windowErrors = new Rate('window_errors');

export const thresholds = {
  measured_errors: ['rate<0.001'],
  boot_id_changed: ['count==0'],
};
for (let w = 0; w < WINDOWS; w++) {
  thresholds[`window_latency{w:${w}}`] = ['max>=0'];
  thresholds[`window_errors{w:${w}}`] = ['rate>=0'];
}
if (WINDOWS) for (const part of ['first', 'last']) thresholds[`window_latency{part:${part}}`] = ['max>=0'];

export function bootId() {
  const r = http.get(`${ADMIN}/healthz`, { tags: { name: 'healthz' } });
  if (r.status !== 200) throw new Error(`ingest not answering at ${ADMIN}/healthz: ${r.status} ${r.error}`);
  return r.json('boot_id');
}

// The lifecycle every script re-exports: boot id before and after, the id log's RUN marker,
// and the summary file.
export function setup() {
  const run = newRun();
  logRun(run);
  return { boot_id: bootId(), started: new Date().toISOString(), run };
}

export function teardown(data) {
  if (bootId() !== data.boot_id) bootChanged.add(1);
}

export function handleSummary(data) {
  return summarize(data);
}

/** POST parameters for one route. */
// The API key: the token in the file INGEST_KEY_FILE names (scripts/stack up makes the lab's),
// read once at init; without one the ingest answers 401 unless it runs with --auth none.
const KEY_FILE = __ENV.INGEST_KEY_FILE || '';
const KEY = KEY_FILE ? open(KEY_FILE).trim() : '';

export function postParams(name, timeout = '10s') {
  const headers = { 'Content-Type': 'application/json' };
  if (KEY) headers.Authorization = `Bearer ${KEY}`;
  return { headers, tags: { name }, timeout };
}

/** Counts and logs one response to the messages `msgs`. */
export function record(res, msgs) {
  const cls = classOf(res.status);
  byClass[cls].add(msgs.length);
  logIds(cls, msgs);
  if (exec.scenario.name.startsWith('warmup')) return;
  const ok = res.status === 202;
  measuredRequests.add(1);
  measuredMessages.add(msgs.length);
  measuredErrors.add(!ok);
  measuredLatency.add(res.timings.duration);
  if (!ok) (statusCounters[String(res.status)] || otherStatus).add(1);
  if (WINDOWS) {
    // The window the request was sent in, counted from the measured scenario's start.
    const sent = Date.now() - res.timings.duration - exec.scenario.startTime;
    const w = Math.max(0, Math.min(WINDOWS - 1, Math.floor(sent / 1000 / WINDOW.secs)));
    const tags = { w: String(w), part: partOf(w) };
    windowLatency.add(res.timings.duration, tags);
    windowErrors.add(!ok, tags);
  }
}

/** The soak's windows: requests, errors and latency of each, in order. */
function windows(data) {
  const out = [];
  for (let w = 0; w < WINDOWS; w++) {
    const lat = data.metrics[`window_latency{w:${w}}`];
    const err = data.metrics[`window_errors{w:${w}}`];
    const v = (m, f) => (m && m.values[f] !== undefined ? m.values[f] : null);
    out.push({
      w,
      start_s: w * WINDOW.secs,
      secs: Math.min(WINDOW.secs, MEASURED.secs - w * WINDOW.secs),
      requests: (v(err, 'passes') || 0) + (v(err, 'fails') || 0),
      errors: v(err, 'passes') || 0,
      latency_ms: { p50: v(lat, 'med'), p99: v(lat, 'p(99)'), max: v(lat, 'max') },
    });
  }
  return out;
}

function val(data, name, field) {
  const m = data.metrics[name];
  return m ? m.values[field] : 0;
}

export function summarize(data) {
  // k6's own counter rate divides by the whole run (warm-up included); the measured phase is DURATION.
  const seconds = MEASURED.secs;
  const run = data.setup_data ? data.setup_data.run : null;
  const counts = {
    A: val(data, 'accepted_messages', 'count'),
    U: val(data, 'uncertain_messages', 'count'),
    R: val(data, 'refused_messages', 'count'),
  };
  if (run) logEnd(run, counts);
  const requests = val(data, 'measured_requests', 'count');
  const non202 = {};
  for (const k of Object.keys(data.metrics)) {
    if (k.startsWith('status_') && val(data, k, 'count') > 0) non202[k.slice(7)] = val(data, k, 'count');
  }
  const lat = (p) => val(data, 'measured_latency', p);
  const errorRate = val(data, 'measured_errors', 'rate');
  const verdicts = [];
  if (errorRate > 0.001) verdicts.push(`error rate ${(errorRate * 100).toFixed(3)} % is over 0.1 %`);
  if (val(data, 'boot_id_changed', 'count') > 0) verdicts.push('the ingest restarted during the run (boot_id changed)');
  // The reference's "hit the air": a dead app answers errors fast, which looks like great throughput.
  if (lat('med') < 0.3 && Object.keys(non202).length > 0) {
    verdicts.push(`implausible: median latency ${lat('med').toFixed(3)} ms with non-202 responses: you measured errors, not the pipeline`);
  }
  const summary = {
    script: scriptNameOf() || __ENV.SCRIPT || '',
    base_url: BASE,
    boot_id_start: data.setup_data ? data.setup_data.boot_id : null,
    boot_id_changed: val(data, 'boot_id_changed', 'count') > 0,
    accepted: counts.A,
    uncertain: counts.U,
    refused: counts.R,
    // The id log (lib/ids.js): reconcile checks id sets when this is present, totals otherwise.
    ids: IDS_FILE && run ? { file: IDS_FILE, run, format: FORMAT } : null,
    measured: {
      requests,
      non_202: non202,
      error_rate: errorRate,
      seconds,
      rate_per_s: requests / seconds,
      messages_per_s: val(data, 'measured_messages', 'count') / seconds,
      latency_ms: { p50: lat('med'), p90: lat('p(90)'), p95: lat('p(95)'), p99: lat('p(99)'), max: lat('max') },
      // Open loop: the measured scenario's drops alone when the script declares the sub-metric.
      dropped_iterations: data.metrics['dropped_iterations{scenario:measured}']
        ? val(data, 'dropped_iterations{scenario:measured}', 'count')
        : val(data, 'dropped_iterations', 'count'),
    },
    verdicts,
    ok: verdicts.length === 0,
  };
  if (WINDOWS) {
    summary.windows = windows(data);
    const edge = (part) => {
      const m = data.metrics[`window_latency{part:${part}}`];
      return m ? { p50: m.values.med, p99: m.values['p(99)'] } : null;
    };
    summary.window_edges = { windows: EDGE, first: edge('first'), last: edge('last') };
  }
  const idsNote = summary.ids ? `ids: ${IDS_FILE} (run ${run})` : 'ids NOT recorded (set K6_CONSOLE_OUTPUT): reconcile can check totals only';
  const line = `accepted=${summary.accepted} uncertain=${summary.uncertain} refused=${summary.refused} measured: ${requests} requests, ${summary.measured.rate_per_s.toFixed(1)}/s, ` +
    `p50 ${lat('med').toFixed(2)} ms, p99 ${lat('p(99)').toFixed(2)} ms, non-202 ${JSON.stringify(non202)}` +
    (verdicts.length ? `\nFAILED: ${verdicts.join('; ')}` : '\nOK') + `\nsummary: ${OUT}\n${idsNote}\n`;
  return { [OUT]: JSON.stringify(summary, null, 2), stdout: line };
}
