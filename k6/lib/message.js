// Message generator: ids unique per VU and iteration (and per run, via RUN_ID), realistic
// sender/recipient names, a body of BODY_BYTES (default 256) bytes, and `sent_at` the client's
// clock in milliseconds (what every store keeps), so the id log's digest covers every field.
import exec from 'k6/execution';
import { intSetting } from './config.js';

const BODY_BYTES = intSetting('BODY_BYTES');
const RUN_ID = __ENV.RUN_ID || `${Date.now().toString(36)}`;
const WORDS = ['order', 'shipped', 'invoice', 'payment', 'refund', 'hello', 'meeting', 'report', 'delta', 'ok'];

function body(n) {
  let s = '';
  let i = 0;
  while (s.length < n) {
    s += WORDS[(i * 7 + n) % WORDS.length] + ' ';
    i++;
  }
  return s.slice(0, n);
}
const BODY = body(BODY_BYTES);

let seq = 0;

/** One message; `k` distinguishes the items of one batch. */
export function message(k = 0) {
  const vu = exec.vu.idInTest;
  const it = exec.vu.iterationInScenario;
  const scen = exec.scenario.name;
  seq++;
  return {
    id: `${RUN_ID}-${scen}-${vu}-${it}-${k}-${seq}`.slice(0, 64),
    sender: `user-${vu % 1000}`,
    recipient: `user-${(vu * 31 + it) % 1000}`,
    body: BODY,
    sent_at: new Date().toISOString(),
  };
}
