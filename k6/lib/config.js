// The one place that owns the scripts' settings: every default, and the one duration parser.
// Scripts and the summary read their settings from here, so the summary's rates divide by the
// duration the scenario really ran (batch.js once defaulted to 30s while the summary assumed
// 60s) and `WARMUP=1m` means a minute (closed-loop.js once read it as 1 second).

// Environment variable → default. Shared by every script unless noted.
export const DEFAULTS = {
  INGEST_URL: 'http://127.0.0.1:8080',
  SUMMARY_FILE: 'k6/out/summary.json',
  DURATION: '60s', // measured phase, every script
  BODY_BYTES: '256',
  VUS: '250', // closed-loop.js; batch.js uses BATCH_VUS_DEFAULT below when VUS is unset
  WARMUP_ROUNDS: '3', // closed-loop.js
  WARMUP: '10s', // closed-loop.js, one warm-up round
  RATE: '1000', // open-loop.js, requests per second
  PRE_VUS: '100', // open-loop.js
  MAX_VUS: '500', // open-loop.js
  BATCH: '100', // batch.js, messages per request
  REQUEST_TIMEOUT: '10s', // single POSTs; batch.js uses BATCH_DEFAULTS.REQUEST_TIMEOUT when unset
};
// batch.js: fewer VUs, each sending BATCH messages per request, with more time per request.
export const BATCH_DEFAULTS = { VUS: '20', REQUEST_TIMEOUT: '30s' };

/** The setting NAME: the environment's value, else the default above. */
export function setting(name, fallback) {
  const v = __ENV[name];
  if (v !== undefined && v !== '') return v;
  if (fallback !== undefined) return fallback;
  if (!(name in DEFAULTS)) throw new Error(`no default for ${name}`);
  return DEFAULTS[name];
}

/** An integer setting; a non-number is an error, not NaN. */
export function intSetting(name, fallback) {
  const v = setting(name, fallback);
  if (!/^\d+$/.test(v)) throw new Error(`${name}=${v} is not a whole number`);
  return parseInt(v, 10);
}

const UNITS = { ms: 0.001, s: 1, m: 60, h: 3600 };

/** Seconds in a k6 duration: `90s`, `1m`, `1m30s`, `500ms`, `1h`, or a bare number of seconds. */
export function seconds(d) {
  const text = String(d).trim();
  if (/^\d+(\.\d+)?$/.test(text)) return parseFloat(text);
  const re = /(\d+(?:\.\d+)?)(ms|s|m|h)/g;
  let total = 0;
  let consumed = 0;
  let m;
  while ((m = re.exec(text)) !== null) {
    if (m.index !== consumed) break;
    total += parseFloat(m[1]) * UNITS[m[2]];
    consumed = re.lastIndex;
  }
  if (consumed === 0 || consumed !== text.length) throw new Error(`duration ${d} is not like 60s, 2m, 1m30s`);
  return total;
}

/** A duration setting, checked: `{ text, secs }` (k6 takes the text, the summary the seconds). */
export function durationSetting(name, fallback) {
  const text = setting(name, fallback);
  return { text, secs: seconds(text) };
}

/**
 * How long a scenario lets in-flight requests finish after its duration: longer than the request
 * timeout, so k6 never interrupts an iteration between sending a request and recording its
 * answer (an interrupted iteration's ids would be in no class of the id log).
 */
export function gracefulStop(timeout) {
  return `${Math.ceil(timeout.secs) + 5}s`;
}

/** The measured phase: what every script runs and what the summary divides by. */
export const MEASURED = durationSetting('DURATION');

// The script's name (set by `script()`), for the summary.
let scriptName = '';

/** Names the running script (call once, in its init code). */
export function script(name) {
  scriptName = name;
}

export function scriptNameOf() {
  return scriptName;
}

/**
 * The scenarios of a run: `rounds` warm-up scenarios of `warmup` (their requests are stored but not
 * measured), one second apart, then `measured` 5 s after the last. `make(duration, startTime)`
 * builds one scenario. Every script lays its phases out like this, so the experiment runner can
 * find the measured phase the same way whatever the script.
 */
export function laidOut(rounds, warmup, make) {
  const scenarios = {};
  for (let i = 0; i < rounds; i++) scenarios[`warmup_${i + 1}`] = make(warmup.text, `${i * (warmup.secs + 1)}s`);
  scenarios.measured = make(MEASURED.text, `${rounds * (warmup.secs + 1) + (rounds ? 5 : 0)}s`);
  return scenarios;
}
