// copy-proto.js — copies the contract (proto/idem/v1/*.proto at the repository root) into this
// package's proto/ folder, which `npm pack` ships and src/proto.ts loads. Run by `npm run build`.
// Outside the repository (an unpacked tarball) the shipped copy is kept as it is.
'use strict';
const fs = require('fs');
const path = require('path');

const src = path.resolve(__dirname, '..', '..', '..', 'proto', 'idem', 'v1');
const dst = path.resolve(__dirname, '..', 'proto', 'idem', 'v1');
if (!fs.existsSync(src)) {
  if (!fs.existsSync(path.join(dst, 'coordinator.proto'))) {
    console.error(`copy-proto: neither ${src} nor ${dst} holds coordinator.proto`);
    process.exit(1);
  }
  process.exit(0);
}
fs.mkdirSync(dst, { recursive: true });
for (const f of fs.readdirSync(src).filter((n) => n.endsWith('.proto'))) {
  fs.copyFileSync(path.join(src, f), path.join(dst, f));
}
