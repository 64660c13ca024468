#!/usr/bin/env node
// conformance-runner.js — idem-client's runner of the conformance scenarios
// (client-lib/conformance/scenarios.json; format and environment in that folder's README.md).
// Run through client-lib/conformance/run, which starts the coordinators and sets the environment:
//   client-lib/conformance/run node client-lib/node/test/conformance-runner.js [SCENARIO...]
// Prints "ok NAME" or "not ok NAME: what differed" a scenario ("skip NAME: needs WHAT" for one
// that needs a capability this runner lacks); exits 0 only when all it ran passed.
'use strict';
const { execSync } = require('child_process');
const fs = require('fs');
const http = require('http');
const path = require('path');
const { IdemClient } = require('..');

// the capabilities a scenario's "needs" may name that this runner has
const HAS = ['resolve'];

function keyOf(s, call) {
  return {
    globalId: s.globalId,
    service: call.service ?? 'conformance',
    operation: call.step ?? 'step',
    phase: call.phase === 'compensation' ? 'compensation' : 'forward',
  };
}

function fromReport(g, rep) {
  if (!rep) return;
  g.replayed = rep.replayed;
  g.takeover = rep.takeover;
  g.unguarded = rep.unguarded;
  g.journaled = rep.journaled;
  g.decision = rep.decision;
  g.attempt = rep.attempt;
  if (rep.result) {
    g.outcome = rep.result.outcome;
    g.code = rep.result.code;
    g.body = rep.result.body.toString('utf8');
  }
}

async function doRun(s, call) {
  const g = { ok: false, ran: false };
  const act = call.action ?? {};
  const opt = call.options ?? {};
  try {
    const rep = await s.client.runStep(keyOf(s, call), async () => {
      g.ran = true;
      if (act.sleep_ms) await sleep(act.sleep_ms);
      return { outcome: act.outcome ?? 'succeeded', code: act.code ?? 0, body: act.body ?? '' };
    }, {
      fingerprint: Buffer.from(call.fingerprint ?? '', 'utf8'),
      deadlineMs: opt.deadline_ms ?? 10000,
      noWait: !!opt.no_wait,
      leaseMs: opt.lease_ms ?? 0,
    });
    g.ok = true;
    fromReport(g, rep);
  } catch (e) {
    g.error = e.code;
    g.reason = e.reason;
    g.detail = e.detail;
    g.hint = e.hint;
    g.message = e.message;
    g.outcome_unknown = !!e.outcomeUnknown;
    if (e.code === 'STEP_FAILED') fromReport(g, e.report);
  }
  return g;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// count_calls: idem_rpc_calls_total of METHOD (Coordinator/METHOD when it names no service) with
// code CODE (default OK; 'any': every code summed) on the leader's /metrics
// (IDEM_METRICS_ADDRESS), less what this scenario's previous count of the method and code saw
function countCalls(s, method, code) {
  return new Promise((resolve) => {
    http.get(`http://${process.env.IDEM_METRICS_ADDRESS}/metrics`, (res) => {
      let text = '';
      res.on('data', (d) => { text += d; });
      res.on('end', () => {
        const full = method.includes('/') ? method : `Coordinator/${method}`;
        const want = `idem_rpc_calls_total{method="${full}",code="${code === 'any' ? '' : `${code}"} `}`;
        const lines = text.split('\n').filter((l) => l.startsWith(want));
        if (!lines.length) return resolve({ ok: false, error: `no ${want} on the leader's /metrics` });
        const total = lines.reduce((n, l) => n + Number(l.slice(l.indexOf('} ') + 2)), 0);
        const counted = `${method} ${code}`;
        const count = total - (s.counted.get(counted) ?? 0);
        s.counted.set(counted, total);
        return resolve({ ok: true, count });
      });
    }).on('error', (e) => resolve({ ok: false, error: e.message }));
  });
}

async function attempt(fn) {
  try {
    return { ok: true, ...(await fn()) };
  } catch (e) {
    if (!e.code) throw e;
    return { ok: false, error: e.code, reason: e.reason, detail: e.detail, hint: e.hint,
      outcome_unknown: !!e.outcomeUnknown };
  }
}

function check(expect, g) {
  const why = [];
  for (const [n, want] of Object.entries(expect)) {
    const have = n === 'count' ? g.count : n === 'outcome_unknown' ? !!g.outcome_unknown : g[n];
    if (n === 'error') {
      const ok = Array.isArray(want) ? want.includes(g.error) : want === g.error;
      if (!ok) why.push(`error ${JSON.stringify(want)}, got ${g.error ?? 'none'}${g.reason ? ` (${g.reason})` : ''}`);
      else if (g.error === 'STEP_UNKNOWN' && g.outcome_unknown !== true) why.push('error STEP_UNKNOWN without outcomeUnknown'); // errors.ts, api.md §20
    } else if (have !== want) {
      why.push(`${n} ${JSON.stringify(want)}, got ${JSON.stringify(have)}${n === 'ok' && g.error ? ` (${g.error} ${g.reason || ''}: ${g.message})` : ''}`);
    }
  }
  return why.join('; ');
}

async function runScenario(sc, index) {
  const which = sc.client ?? 'leader';
  const v = which === 'standby' ? 'IDEM_STANDBY_ADDRESS' : which === 'stoppable' ? 'IDEM_STOPPABLE_ADDRESS'
    : which === 'lossy' ? 'IDEM_LOSSY_ADDRESS' : 'IDEM_ADDRESS';
  const address = process.env[v];
  if (!address) return `${v} is not set`;
  const s = { journal: undefined, counted: new Map() };
  if (sc.journal) {
    s.journal = path.join(process.env.IDEM_CONFORMANCE_TMP || '/tmp', `node-${process.pid}-${index}.journal`);
    fs.rmSync(s.journal, { force: true });
  }
  s.client = IdemClient.connect({ address, journalPath: s.journal });
  const bg = new Map();
  try {
    try {
      s.globalId = (await s.client.beginSaga({ sagaType: 'conformance' })).globalId;
    } catch (e) {
      return `BeginSaga: ${e.message} (${e.reason})`;
    }
    let i = 0;
    for (const call of sc.calls) {
      i++;
      let g;
      switch (call.call) {
        case 'run':
          if (call.background) {
            bg.set(call.background, doRun(s, call));
            continue;
          }
          g = await doRun(s, call);
          break;
        case 'join':
          if (!bg.has(call.background)) return `call ${i}: no background run named ${call.background}`;
          g = await bg.get(call.background);
          bg.delete(call.background);
          break;
        case 'begin':
          g = await attempt(async () => {
            const b = await s.client.beginStep(keyOf(s, call), {
              fingerprint: Buffer.from(call.fingerprint ?? '', 'utf8'), leaseMs: call.lease_ms ?? 0,
            });
            const r = { decision: b.decision, attempt: b.attempt, takeover: b.takeover };
            if (b.result) Object.assign(r, { outcome: b.result.outcome, code: b.result.code, body: b.result.body.toString() });
            return r;
          });
          break;
        case 'complete': {
          const res = call.result ?? {};
          g = await attempt(async () => {
            await s.client.completeStep(keyOf(s, call), call.attempt ?? 0,
              { outcome: res.outcome ?? 'succeeded', code: res.code ?? 0, body: res.body ?? '' });
            return {};
          });
          break;
        }
        case 'resolve':
          g = await attempt(async () => {
            const r = await s.client.resolveStep(keyOf(s, call), {
              outcome: call.outcome, code: call.code ?? 0, body: call.body ?? '',
              reason: call.reason ?? 'conformance', actor: call.actor ?? '',
            });
            const out = { attempt: r.attempt };
            if (r.result) Object.assign(out, { outcome: r.result.outcome, code: r.result.code, body: r.result.body.toString() });
            return out;
          });
          break;
        case 'policy_set':
          g = await attempt(async () => {
            // as given (absent = 0): 0 is the SDK's to fill with the built-in default
            const p = await s.client.setPolicy({
              service: call.service ?? '', operation: call.operation ?? '',
              failureMode: call.failure_mode === 'fail-open' ? 'fail-open' : 'fail-closed',
              retentionS: call.retention_s ?? 0, leaseMs: call.lease_ms ?? 0,
              keyRetentionS: call.key_retention_s ?? 0,
            });
            return { retention_s: p.retentionS, lease_ms: p.leaseMs, key_retention_s: p.keyRetentionS };
          });
          break;
        case 'sleep':
          await sleep(call.ms ?? 0);
          g = { ok: true };
          break;
        case 'count_calls':
          g = await countCalls(s, call.method ?? '', call.code ?? 'OK');
          break;
        case 'policy_prefetch':
          g = await attempt(async () => {
            await s.client.prefetchPolicy(call.service ?? '', call.operation ?? '');
            return {};
          });
          break;
        case 'stop_coordinator':
          g = { ok: true };
          try {
            execSync(process.env.IDEM_CONFORMANCE_STOP || 'false', { stdio: 'inherit', shell: '/bin/sh' });
          } catch {
            return `call ${i}: IDEM_CONFORMANCE_STOP failed`;
          }
          break;
        case 'faults': { // the lossy front's rules: a new file renamed over the old
          const file = process.env.IDEM_CONFORMANCE_FAULTS;
          fs.writeFileSync(`${file}.new`, JSON.stringify({ rules: call.rules ?? [] }));
          fs.renameSync(`${file}.new`, file);
          g = { ok: true };
          break;
        }
        case 'journal_lines': {
          let text = '';
          try {
            text = s.journal ? fs.readFileSync(s.journal, 'utf8') : '';
          } catch { /* no file: no lines */ }
          g = { ok: true, count: text.split('\n').filter((l) => l.trim() !== '').length };
          break;
        }
        default:
          return `call ${i}: unknown call "${call.call}"`;
      }
      if (call.expect) {
        const why = check(call.expect, g);
        if (why) return `call ${i} (${call.call}): ${why}`;
      }
    }
    return '';
  } finally {
    await Promise.allSettled(bg.values());
    s.client.close();
  }
}

async function main() {
  const dir = process.env.IDEM_CONFORMANCE_DIR;
  if (!dir) {
    console.error('conformance-runner: IDEM_CONFORMANCE_DIR is not set (run it through client-lib/conformance/run)');
    process.exit(2);
  }
  const file = JSON.parse(fs.readFileSync(path.join(dir, 'scenarios.json'), 'utf8'));
  const only = process.argv.slice(2);
  let failed = 0;
  let index = 0;
  for (const sc of file.scenarios) {
    index++;
    if (only.length && !only.includes(sc.name)) continue;
    const need = (sc.needs ?? []).find((n) => !HAS.includes(n));
    if (need) {
      console.log(`skip ${sc.name}: needs ${need}`);
      continue;
    }
    let why;
    try {
      why = await runScenario(sc, index);
    } catch (e) {
      why = `threw ${e && e.stack ? e.stack.split('\n')[0] : e}`;
    }
    if (why) {
      failed++;
      console.log(`not ok ${sc.name}: ${why}`);
    } else {
      console.log(`ok ${sc.name}`);
    }
  }
  process.exit(failed ? 1 : 0);
}

main();
