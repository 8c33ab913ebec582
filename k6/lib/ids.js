// The id log: which message ids the ingest ACCEPTED (202), which are UNCERTAIN (504, a client
// timeout or connection error, any other unexpected answer) and which it REFUSED (503, 4xx),
// so that `reconcile` can check id sets instead of totals; and with each accepted or uncertain
// id, `id:digest`, the digest of the content sent (pipeline_common::digest::sent: the first 16
// hex digits of SHA-256 over JSON.stringify([sender, recipient, body, sent_at])), so that
// reconcile checks the stores hold what was sent, not only that they agree.
//
// k6 VUs cannot write files and handleSummary cannot see per-VU data, so each response becomes
// one console line, `k6ids <A|U|R> <id> [<id>...]`, and the caller sends the console to a file
// with the environment variable K6_CONSOLE_OUTPUT (K6_LOG_FORMAT=raw keeps the lines bare;
// reconcile also reads k6's default logfmt and json formats). k6 APPENDS to that file, so the
// lines of one run sit between `k6ids RUN <run>` (setup) and `k6ids END <run> A=.. U=.. R=..`
// (handleSummary); reconcile reads only that section and checks its counts against the summary.
// Without K6_CONSOLE_OUTPUT nothing is logged and the summary says `ids: null` (totals only).
//
// Cost, measured with k6 1.1.0 on the 2-core dev box (120,000 lines, CPU time with and without):
// 12-28 µs of CPU per line in raw format (logfmt costs about twice that), i.e. 3-6 % of one core
// at 2,000 requests/s; batch.js writes one line per request, not per message. The file takes
// ~50 bytes per single-message request (about 6 MB a minute at 2,000 requests/s).

import crypto from 'k6/crypto';

export const IDS_FILE = __ENV.K6_CONSOLE_OUTPUT || null;
export const FORMAT = 'k6ids lines: `k6ids A|U|R <id>[:<digest>]...` between `k6ids RUN <run>` and `k6ids END <run> A=<n> U=<n> R=<n>`';

/** The class of an answer: A accepted, R refused (never written), U uncertain (may be written). */
export function classOf(status) {
  if (status === 202) return 'A';
  if (status === 503 || (status >= 400 && status < 500)) return 'R';
  // 504 by contract; 0 (timeout, reset) and anything unexpected (500, 502, 200...) conservatively.
  return 'U';
}

/** Logs the ids of one response. */
/** The digest of what was sent of message `m` (16 hex digits). */
export function digest(m) {
  return crypto.sha256(JSON.stringify([m.sender, m.recipient, m.body, m.sent_at]), 'hex').slice(0, 16);
}

/** Logs the messages of one response: `id:digest` where the content may be stored. */
export function logIds(cls, msgs) {
  if (!IDS_FILE) return;
  const tokens = cls === 'R' ? msgs.map((m) => m.id) : msgs.map((m) => `${m.id}:${digest(m)}`);
  console.log(`k6ids ${cls} ${tokens.join(' ')}`);
}

/** A run id unique enough to tell appended runs apart. */
export function newRun() {
  return `${Date.now().toString(36)}-${Math.floor(Math.random() * 0x100000000).toString(36)}`;
}

export function logRun(run) {
  if (IDS_FILE) console.log(`k6ids RUN ${run}`);
}

export function logEnd(run, counts) {
  if (IDS_FILE) console.log(`k6ids END ${run} A=${counts.A} U=${counts.U} R=${counts.R}`);
}
