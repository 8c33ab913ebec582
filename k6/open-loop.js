// Open-loop load, free of coordinated omission: RATE requests/s (constant arrival rate) for
// DURATION, up to MAX_VUS in flight; requests k6 could not start in time are reported as
// dropped_iterations. Same summary file as closed-loop.js.
//   k6 run -e RATE=2000 -e DURATION=60s k6/open-loop.js
import http from 'k6/http';
import { message } from './lib/message.js';
import { record, postParams, thresholds, BASE } from './lib/summary.js';
export { setup, teardown, handleSummary } from './lib/summary.js';

export const options = {
  scenarios: {
    measured: {
      executor: 'constant-arrival-rate',
      rate: parseInt(__ENV.RATE || '1000', 10),
      timeUnit: '1s',
      duration: __ENV.DURATION || '60s',
      preAllocatedVUs: parseInt(__ENV.PRE_VUS || '100', 10),
      maxVUs: parseInt(__ENV.MAX_VUS || '500', 10),
    },
  },
  thresholds,
  summaryTrendStats: ['med', 'p(90)', 'p(95)', 'p(99)', 'max'],
};
const params = postParams('POST /v1/messages', '10s');

export default function () {
  record(http.post(`${BASE}/v1/messages`, JSON.stringify(message()), params), 1);
}
