// pack.test.js — the npm package as published: `npm pack` ships dist/, the proto files and the
// example, and the unpacked package loads its own copy of the contract (not the repository's).
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { execFileSync } = require('child_process');
const fs = require('fs');
const path = require('path');
const h = require('./helpers');

test('npm pack ships dist, proto and the example; the unpacked package loads its own proto', () => {
  const pkgDir = path.resolve(__dirname, '..');
  const tmp = h.tmpDir('idem-node-pack-');
  try {
    // dist/ is built by test/run.sh (no prepack here: tests may build in parallel)
    const out = execFileSync('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', tmp], { cwd: pkgDir, encoding: 'utf8' });
    const info = JSON.parse(out)[0];
    const files = info.files.map((f) => f.path);
    for (const f of ['dist/index.js', 'dist/index.d.ts', 'dist/http/express.js', 'proto/idem/v1/coordinator.proto', 'examples/http.js', 'package.json'])
      assert.ok(files.includes(f), `${f} is not in the package`);
    assert.ok(!files.some((f) => f.startsWith('src/') || f.startsWith('test/') || f.startsWith('node_modules/')));
    execFileSync('tar', ['xzf', path.join(tmp, info.filename), '-C', tmp]);
    const script = `const m = require(${JSON.stringify(path.join(tmp, 'package'))});
      const c = m.IdemClient.connect({ address: '127.0.0.1:1' }); c.close();
      process.stdout.write(m.protoDir());`;
    const dir = execFileSync(process.execPath, ['-e', script], {
      encoding: 'utf8', env: { ...process.env, NODE_PATH: path.join(pkgDir, 'node_modules') },
    });
    assert.equal(dir, path.join(tmp, 'package', 'proto'));
    assert.equal(fs.readFileSync(path.join(dir, 'idem', 'v1', 'coordinator.proto'), 'utf8'),
      fs.readFileSync(path.join(h.SOURCE_DIR, 'proto', 'idem', 'v1', 'coordinator.proto'), 'utf8'));
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
});
