// The seed's load: VUS (250) virtual users posting single messages for DURATION (60s), after
// WARMUP_ROUNDS (3) warm-up rounds of WARMUP (10s) whose requests are not measured (but are
// counted in `accepted`, since they are stored too).
//   k6 run -e INGEST_URL=http://127.0.0.1:8080 -e VUS=250 -e DURATION=60s k6/closed-loop.js
import http from 'k6/http';
import { message } from './lib/message.js';
import { record, postParams, thresholds, BASE } from './lib/summary.js';
export { setup, teardown, handleSummary } from './lib/summary.js';

const VUS = parseInt(__ENV.VUS || '250', 10);
const DURATION = __ENV.DURATION || '60s';
const ROUNDS = parseInt(__ENV.WARMUP_ROUNDS || '3', 10);
const WARMUP = __ENV.WARMUP || '10s';
const warmSecs = parseInt(WARMUP, 10);

const scenarios = {};
for (let i = 0; i < ROUNDS; i++) {
  scenarios[`warmup_${i + 1}`] = {
    executor: 'constant-vus', vus: VUS, duration: WARMUP, startTime: `${i * (warmSecs + 1)}s`, gracefulStop: '5s',
  };
}
scenarios.measured = {
  executor: 'constant-vus', vus: VUS, duration: DURATION, startTime: `${ROUNDS * (warmSecs + 1) + (ROUNDS ? 5 : 0)}s`, gracefulStop: '10s',
};

export const options = { scenarios, thresholds, summaryTrendStats: ['med', 'p(90)', 'p(95)', 'p(99)', 'max'] };
const params = postParams('POST /v1/messages', '10s');

export default function () {
  record(http.post(`${BASE}/v1/messages`, JSON.stringify(message()), params), 1);
}
