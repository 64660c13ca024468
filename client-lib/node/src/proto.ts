// proto.ts — loads idem.v1 (coordinator.proto) with @grpc/proto-loader: from the copy this
// package ships (proto/, made by `npm run build`), else from the repository's proto/ folder.
import * as fs from 'fs';
import * as path from 'path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

const FILE = path.join('idem', 'v1', 'coordinator.proto');

/** The folder the contract is loaded from. */
export function protoDir(): string {
  const candidates = [
    path.resolve(__dirname, '..', 'proto'), // the package's own copy (dist/../proto)
    path.resolve(__dirname, '..', '..', '..', 'proto'), // client-lib/node/dist → the repository
  ];
  for (const d of candidates) if (fs.existsSync(path.join(d, FILE))) return d;
  throw new Error(`idem-client: ${FILE} not found in ${candidates.join(' or ')}`);
}

export interface Services {
  Coordinator: grpc.ServiceClientConstructor;
  Admin: grpc.ServiceClientConstructor;
}

let cached: Services | undefined;

/** The service constructors (loaded once). Messages use the proto's field names (keepCase),
 *  enums as their names, 64-bit integers as numbers, bytes as Buffers. */
export function services(): Services {
  if (cached) return cached;
  const def = protoLoader.loadSync(FILE, {
    includeDirs: [protoDir()],
    keepCase: true,
    enums: String,
    longs: Number,
    bytes: Buffer,
    defaults: true,
  });
  const pkg = grpc.loadPackageDefinition(def) as unknown as {
    idem: { v1: Services };
  };
  cached = { Coordinator: pkg.idem.v1.Coordinator, Admin: pkg.idem.v1.Admin };
  return cached;
}
