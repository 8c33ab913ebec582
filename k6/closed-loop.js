// The seed's load: VUS (250) virtual users posting single messages for DURATION (60s), after
// WARMUP_ROUNDS (3) warm-up rounds of WARMUP (10s) whose requests are not measured (but are
// counted in `accepted`, since they are stored too). Defaults: lib/config.js.
//   K6_CONSOLE_OUTPUT=k6/out/summary.ids K6_LOG_FORMAT=raw \
//   k6 run -e INGEST_URL=http://127.0.0.1:8080 -e VUS=250 -e DURATION=60s k6/closed-loop.js
import http from 'k6/http';
import { message } from './lib/message.js';
import { intSetting, durationSetting, gracefulStop, MEASURED, script } from './lib/config.js';
import { record, postParams, thresholds, BASE } from './lib/summary.js';
export { setup, teardown, handleSummary } from './lib/summary.js';

script('closed-loop');
const VUS = intSetting('VUS');
const ROUNDS = intSetting('WARMUP_ROUNDS');
const WARMUP = durationSetting('WARMUP');
const TIMEOUT = durationSetting('REQUEST_TIMEOUT');
const STOP = gracefulStop(TIMEOUT);

// Rounds start one second apart; the measured phase 5 s after the last round's end.
const scenarios = {};
for (let i = 0; i < ROUNDS; i++) {
  scenarios[`warmup_${i + 1}`] = {
    executor: 'constant-vus', vus: VUS, duration: WARMUP.text, startTime: `${i * (WARMUP.secs + 1)}s`, gracefulStop: STOP,
  };
}
scenarios.measured = {
  executor: 'constant-vus', vus: VUS, duration: MEASURED.text, startTime: `${ROUNDS * (WARMUP.secs + 1) + (ROUNDS ? 5 : 0)}s`, gracefulStop: STOP,
};

export const options = { scenarios, thresholds, summaryTrendStats: ['med', 'p(90)', 'p(95)', 'p(99)', 'max'] };
const params = postParams('POST /v1/messages', TIMEOUT.text);

export default function () {
  const m = message();
  record(http.post(`${BASE}/v1/messages`, JSON.stringify(m), params), [m.id]);
}
