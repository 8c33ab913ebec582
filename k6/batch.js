// Batch POSTs of BATCH (100) messages from VUS (20 here) virtual users for DURATION (60s, like
// every script). Same summary file and id log as closed-loop.js. Defaults: lib/config.js.
//   K6_CONSOLE_OUTPUT=k6/out/summary.ids K6_LOG_FORMAT=raw k6 run -e BATCH=100 -e VUS=20 -e DURATION=30s k6/batch.js
import http from 'k6/http';
import { message } from './lib/message.js';
import { intSetting, durationSetting, gracefulStop, MEASURED, BATCH_DEFAULTS, script } from './lib/config.js';
import { record, postParams, thresholds, BASE } from './lib/summary.js';
export { setup, teardown, handleSummary } from './lib/summary.js';

script('batch');
const BATCH = intSetting('BATCH');
const TIMEOUT = durationSetting('REQUEST_TIMEOUT', BATCH_DEFAULTS.REQUEST_TIMEOUT);
export const options = {
  scenarios: {
    measured: {
      executor: 'constant-vus',
      vus: intSetting('VUS', BATCH_DEFAULTS.VUS),
      duration: MEASURED.text,
      gracefulStop: gracefulStop(TIMEOUT),
    },
  },
  thresholds,
  summaryTrendStats: ['med', 'p(90)', 'p(95)', 'p(99)', 'max'],
};
const params = postParams('POST /v1/messages/batch', TIMEOUT.text);

export default function () {
  const items = [];
  for (let k = 0; k < BATCH; k++) items.push(message(k));
  record(http.post(`${BASE}/v1/messages/batch`, JSON.stringify(items), params), items.map((m) => m.id));
}
