// Batch POSTs of BATCH (100) messages from VUS (20) virtual users for DURATION (30s).
//   k6 run -e BATCH=100 -e VUS=20 -e DURATION=30s k6/batch.js
import http from 'k6/http';
import { message } from './lib/message.js';
import { record, postParams, thresholds, BASE } from './lib/summary.js';
export { setup, teardown, handleSummary } from './lib/summary.js';

const BATCH = parseInt(__ENV.BATCH || '100', 10);
export const options = {
  scenarios: { measured: { executor: 'constant-vus', vus: parseInt(__ENV.VUS || '20', 10), duration: __ENV.DURATION || '30s' } },
  thresholds,
  summaryTrendStats: ['med', 'p(90)', 'p(95)', 'p(99)', 'max'],
};
const params = postParams('POST /v1/messages/batch', '30s');

export default function () {
  const items = [];
  for (let k = 0; k < BATCH; k++) items.push(message(k));
  record(http.post(`${BASE}/v1/messages/batch`, JSON.stringify(items), params), BATCH);
}
