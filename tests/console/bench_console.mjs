// bench_console.mjs — the console's server time (its Server-Timing header: from the request's
// arrival to the response queued, store calls included) for a saga page of 200 steps and a steps
// page of 100 rows, on a coordinator of its own. A benchmark, not a test: it prints, it does not
// assert. Usage (the environment scripts/test sets): node tests/console/bench_console.mjs [N]
import { startCoordinator, fixture, Session } from './lib.mjs';

const n = Number(process.argv[2] || 50);
const co = await startCoordinator({ tokens: false });
try {
  const t0 = Date.now();
  const { gid } = fixture(co.grpc, null, 'many', '200');
  console.log(`setup: a saga of 200 steps and 200 unknown steps in ${Date.now() - t0} ms`);
  const s = new Session(co.url);
  await s.get('/');
  const measure = async (label, path, check) => {
    const ms = [];
    for (let i = 0; i < n; i++) {
      const r = await s.get(path);
      if (r.status !== 200 || !check(r.text)) throw new Error(`${label}: status ${r.status}`);
      ms.push(Number(/dur=([0-9.]+)/.exec(r.headers.get('server-timing'))[1]));
    }
    ms.sort((a, b) => a - b);
    const q = p => ms[Math.min(ms.length - 1, Math.floor(p * ms.length))].toFixed(2);
    console.log(`${label}: ${n} requests, server time p50 ${q(0.5)} ms, p90 ${q(0.9)} ms, max ${q(1)} ms`);
  };
  await measure('saga page, 200 steps', `/sagas/${gid}`, t => (t.match(/<tr>/g) || []).length >= 200);
  await measure('steps page, 100 rows', '/steps?state=unknown&page_size=100', t => (t.match(/<tr class/g) || []).length === 100);
  await measure('overview', '/', t => t.includes('counts'));
} finally {
  await co.stop();
}
