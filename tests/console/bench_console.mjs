// bench_console.mjs — the console's server time (its Server-Timing header: from the request's
// arrival to the response queued, store calls included) for a saga page of 200 steps and a steps
// page of 100 rows, on a coordinator of its own. A benchmark, not a test: it prints, it does not
// assert. Usage (the environment scripts/test sets): node tests/console/bench_console.mjs [N]
// With IDEM_BENCH_BIN (build/bench/idem-bench) it then runs `idem-bench --workload pairs` for
// 10 s twice, alone and with a scraper fetching a console page 20 times a second, and prints
// BeginStep+CompleteStep p50/p99 of both runs.
import { execFileSync } from 'node:child_process';
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
  const bench = process.env.IDEM_BENCH_BIN;
  if (bench) {
    const pairs = () => JSON.parse(execFileSync(bench, ['--addr', co.grpc, '--workload', 'pairs',
      '--concurrency', '16', '--duration', '10', '--json'], { encoding: 'utf8' }));
    const show = (label, r) => console.log(`${label}: ${r.throughput.toFixed(0)} pairs/s, p50 ${r.p50_ms.toFixed(2)} ms, p99 ${r.p99_ms.toFixed(2)} ms`);
    show('idem-bench pairs, console idle', await new Promise(r => setImmediate(() => r(pairs()))));
    let scraped = 0, stop = false;
    const pages = ['/', `/sagas/${gid}`, '/steps?state=unknown&page_size=100'];
    const scraper = (async () => { // 20 requests a second, spread evenly
      const s2 = new Session(co.url);
      for (let t = Date.now(); !stop; t += 50) {
        await s2.get(pages[scraped++ % pages.length]);
        await new Promise(r => setTimeout(r, Math.max(0, t + 50 - Date.now())));
      }
    })();
    const { spawn } = await import('node:child_process');
    const r = await new Promise((resolve, reject) => { // the bench in a child: the scraper keeps running here
      const c = spawn(bench, ['--addr', co.grpc, '--workload', 'pairs', '--concurrency', '16', '--duration', '10', '--json']);
      let out = '';
      c.stdout.on('data', d => { out += d; });
      c.on('exit', code => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`idem-bench exit ${code}`))));
    });
    stop = true;
    await scraper;
    show(`idem-bench pairs, console scraped (${scraped} pages in the run)`, r);
  }
} finally {
  await co.stop();
}
