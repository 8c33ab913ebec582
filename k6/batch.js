// Batch POSTs of BATCH (100) messages from VUS (20 here) virtual users for DURATION (60s, like
// every script), after WARMUP_ROUNDS (default 0 here) warm-up rounds of WARMUP laid out like
// closed-loop.js's. Same summary file and id log as closed-loop.js. Defaults: lib/config.js.
//   K6_CONSOLE_OUTPUT=k6/out/summary.ids K6_LOG_FORMAT=raw k6 run -e BATCH=100 -e VUS=20 -e DURATION=30s k6/batch.js
import http from 'k6/http';
import { message } from './lib/message.js';
import { intSetting, durationSetting, gracefulStop, laidOut, BATCH_DEFAULTS, script } from './lib/config.js';
import { record, postParams, thresholds, BASE } from './lib/summary.js';
export { setup, teardown, handleSummary } from './lib/summary.js';

script('batch');
const BATCH = intSetting('BATCH');
const VUS = intSetting('VUS', BATCH_DEFAULTS.VUS);
const ROUNDS = intSetting('WARMUP_ROUNDS', '0');
const WARMUP = durationSetting('WARMUP');
const TIMEOUT = durationSetting('REQUEST_TIMEOUT', BATCH_DEFAULTS.REQUEST_TIMEOUT);
const STOP = gracefulStop(TIMEOUT);
export const options = {
  scenarios: laidOut(ROUNDS, WARMUP, (duration, startTime) => ({
    executor: 'constant-vus', vus: VUS, duration, startTime, gracefulStop: STOP,
  })),
  thresholds,
  summaryTrendStats: ['med', 'p(90)', 'p(95)', 'p(99)', 'max'],
};
const params = postParams('POST /v1/messages/batch', TIMEOUT.text);

export default function () {
  const items = [];
  for (let k = 0; k < BATCH; k++) items.push(message(k));
  record(http.post(`${BASE}/v1/messages/batch`, JSON.stringify(items), params), items);
}
