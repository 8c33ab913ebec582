// Batch POSTs of BATCH (100) messages from VUS (20) virtual users for DURATION (30s).
//   k6 run -e BATCH=100 -e VUS=20 -e DURATION=30s k6/batch.js
import http from 'k6/http';
import { message } from './lib/message.js';
import { record, setupRun, teardownRun, summarize, thresholds, BASE } from './lib/summary.js';

const BATCH = parseInt(__ENV.BATCH || '100', 10);
export const options = {
  scenarios: { measured: { executor: 'constant-vus', vus: parseInt(__ENV.VUS || '20', 10), duration: __ENV.DURATION || '30s' } },
  thresholds,
  summaryTrendStats: ['med', 'p(90)', 'p(95)', 'p(99)', 'max'],
};
const params = { headers: { 'Content-Type': 'application/json' }, tags: { name: 'POST /v1/messages/batch' }, timeout: '30s' };

export function setup() { return setupRun(); }
export default function () {
  const items = [];
  for (let k = 0; k < BATCH; k++) items.push(message(k));
  record(http.post(`${BASE}/v1/messages/batch`, JSON.stringify(items), params), BATCH);
}
export function teardown(data) { teardownRun(data); }
export function handleSummary(data) { return summarize(data); }
