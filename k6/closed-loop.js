// The reference's load: VUS (250) virtual users posting single messages for DURATION (60s), after
// WARMUP_ROUNDS (3) warm-up rounds of WARMUP (10s) whose requests are not measured (but are
// counted in `accepted`, since they are stored too). Defaults: lib/config.js.
//   K6_CONSOLE_OUTPUT=k6/out/summary.ids K6_LOG_FORMAT=raw \
//   k6 run -e INGEST_URL=http://127.0.0.1:8080 -e VUS=250 -e DURATION=60s k6/closed-loop.js
import http from 'k6/http';
import { message } from './lib/message.js';
import { intSetting, durationSetting, gracefulStop, laidOut, script } from './lib/config.js';
import { record, postParams, thresholds, BASE } from './lib/summary.js';
export { setup, teardown, handleSummary } from './lib/summary.js';

script('closed-loop');
const VUS = intSetting('VUS');
const ROUNDS = intSetting('WARMUP_ROUNDS');
const WARMUP = durationSetting('WARMUP');
const TIMEOUT = durationSetting('REQUEST_TIMEOUT');
const STOP = gracefulStop(TIMEOUT);

const scenarios = laidOut(ROUNDS, WARMUP, (duration, startTime) => ({
  executor: 'constant-vus', vus: VUS, duration, startTime, gracefulStop: STOP,
}));

export const options = { scenarios, thresholds, summaryTrendStats: ['med', 'p(90)', 'p(95)', 'p(99)', 'max'] };
const params = postParams('POST /v1/messages', TIMEOUT.text);

export default function () {
  const m = message();
  record(http.post(`${BASE}/v1/messages`, JSON.stringify(m), params), [m]);
}
