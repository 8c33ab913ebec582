// Open-loop load, free of coordinated omission: RATE requests/s (constant arrival rate) for
// DURATION, up to MAX_VUS in flight; requests k6 could not start in time are reported as
// dropped_iterations (the summary counts the measured phase's only). Optional warm-up: WARMUP_ROUNDS
// (default 0 here) rounds of WARMUP at the same rate, laid out like closed-loop.js's (1 s apart,
// the measured phase 5 s after the last). Same summary file and id log as closed-loop.js. With
// WINDOW (e.g. 1m, `experiment soak`) the summary also holds each window's latency and errors.
// Defaults: lib/config.js.
//   K6_CONSOLE_OUTPUT=k6/out/summary.ids K6_LOG_FORMAT=raw k6 run -e RATE=2000 -e DURATION=60s k6/open-loop.js
import http from 'k6/http';
import { message } from './lib/message.js';
import { intSetting, durationSetting, gracefulStop, laidOut, script } from './lib/config.js';
import { record, postParams, thresholds, BASE } from './lib/summary.js';
export { setup, teardown, handleSummary } from './lib/summary.js';

script('open-loop');
const TIMEOUT = durationSetting('REQUEST_TIMEOUT');
const ROUNDS = intSetting('WARMUP_ROUNDS', '0');
const WARMUP = durationSetting('WARMUP');
const STOP = gracefulStop(TIMEOUT);

function arrival(duration, startTime) {
  return {
    executor: 'constant-arrival-rate',
    rate: intSetting('RATE'),
    timeUnit: '1s',
    duration,
    startTime,
    preAllocatedVUs: intSetting('PRE_VUS'),
    maxVUs: intSetting('MAX_VUS'),
    gracefulStop: STOP,
  };
}

const scenarios = laidOut(ROUNDS, WARMUP, arrival);

export const options = {
  scenarios,
  // The sub-metric is declared so the summary can count the measured phase's drops alone.
  thresholds: { ...thresholds, 'dropped_iterations{scenario:measured}': ['count>=0'] },
  summaryTrendStats: ['med', 'p(90)', 'p(95)', 'p(99)', 'max'],
};
const params = postParams('POST /v1/messages', TIMEOUT.text);

export default function () {
  const m = message();
  record(http.post(`${BASE}/v1/messages`, JSON.stringify(m), params), [m]);
}
