#!/usr/bin/env bash
# saga-examples/demo.sh BUILD_DIR COORDINATOR_ADDR PG_URL — the order saga against a running
# idem-coordinator (scripts/quickstart --demo calls it). Starts saga-order, saga-payment and
# saga-inventory on free loopback ports (schemas demo_order, demo_payment, demo_inventory in
# PG_URL's database, recreated on every run), plays five scenes (a double "pay", a gateway
# retry, a late payment callback, an out-of-stock refund, a refund before its charge), prints
# every table, and stops the services.
#
# PAYMENT=go, PAYMENT=node or PAYMENT=java runs the payment participant in Go
# (saga-examples/payment-go), Node (saga-examples/payment-node) or Java (saga-examples/payment-java)
# instead of C (PAYMENT=c, the default): same API, flags,
# tables and behaviour, so the saga crosses languages; polyglot/payment-bin.sh installs and
# builds it first (offline from Debian's packages / the committed npm lock file).
set -euo pipefail
build=$1 coord=$2 pg=$3
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/lib/pg.sh" # free_port
bin="$build/saga-examples"
payment=${PAYMENT:-c}
tenant="demo-$(date +%s)" # a fresh tenant: the coordinator's records of earlier runs stay apart
work=$(mktemp -d /tmp/idem-saga-demo.XXXXXX)
pids=()
stop_services() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap stop_services EXIT
"$root/saga-examples/polyglot/payment-bin.sh" "$build" "$payment" "$work/saga-payment"

# wait for the coordinator (quickstart starts it in the background just before)
for _ in $(seq 1 300); do
  (exec 3<>"/dev/tcp/${coord%:*}/${coord##*:}") 2>/dev/null && break
  sleep 0.1
done

psql -qX "$pg" -c "DROP SCHEMA IF EXISTS demo_order, demo_payment, demo_inventory CASCADE" \
  >/dev/null 2>&1

start() { # start NAME PORT ARGS...
  local name=$1 port=$2
  shift 2
  local exe="$bin/saga-$name"
  [ "$name" = payment ] && exe="$work/saga-payment"
  "$exe" --listen "127.0.0.1:$port" --pg "$pg" --schema "demo_$name" \
    --coordinator "$coord" --tenant "$tenant" "$@" >"$work/$name.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 300); do
    grep -q "listening on" "$work/$name.log" 2>/dev/null && return 0
    sleep 0.05
  done
  cat "$work/$name.log" >&2
  echo "saga-$name did not start" >&2
  exit 1
}
pay_port=$(free_port) inv_port=$(free_port) ord_port=$(free_port)
echo "== payment participant: $payment (PAYMENT=c|go|node|java)"
start payment "$pay_port"
start inventory "$inv_port" --stock widget=10,gadget=1
start order "$ord_port" --payments "127.0.0.1:$pay_port" --inventory "127.0.0.1:$inv_port"
client="$bin/saga-client"
ord="127.0.0.1:$ord_port" pay="127.0.0.1:$pay_port"

echo "== 1. the user presses \"pay\" twice (two concurrent PlaceOrder, key pay-42)"
"$client" "$ord" place pay-42 alice widget 2 1999 >"$work/click1" &
c1=$!
"$client" "$ord" place pay-42 alice widget 2 1999 >"$work/click2" &
c2=$!
wait "$c1" "$c2"
sed 's/^/   click: /' "$work/click1" "$work/click2"
gid=$(sed -n 's/^global_id=\([^ ]*\).*/\1/p' "$work/click1")
echo "== 2. the gateway retries the first request (once it was answered)"
"$client" "$ord" place pay-42 alice widget 2 1999 | sed 's/^/   retry: /'
echo "== 3. the payment channel's late callback delivers the charge again"
"$client" "$pay" charge "$gid" alice 1999 | sed 's/^/   callback: /'
echo "== 4. another order runs out of stock (gadget: 1 left, 2 wanted): refund and cancel"
"$client" "$ord" place pay-43 bob gadget 2 500 | sed 's/^/   /'
echo "== 5. a refund that arrives before its charge (null compensation), then the charge (hanging)"
"$client" "$pay" refund hanging-saga-1 | sed 's/^/   refund: /'
"$client" "$pay" charge hanging-saga-1 carol 700 | sed 's/^/   charge: /'
echo "== 6. a payment service dies in the middle of a charge: its lease runs out, the step is stuck"
/usr/bin/python3 - "$coord" "$tenant" "$root/proto" "$work" <<'PY' | sed 's/^/   /'
import subprocess, sys
addr, tenant, proto, work = sys.argv[1:5]
subprocess.run(["protoc", f"--python_out={work}", "-I", proto, "idem/v1/coordinator.proto"], check=True)
sys.path.insert(0, work)
import grpc
from idem.v1 import coordinator_pb2 as pb
with grpc.insecure_channel(addr) as ch:
    md = (("idem-tenant", tenant),)
    call = lambda m, req, resp: ch.unary_unary(f"/idem.v1.Coordinator/{m}",
        request_serializer=req.SerializeToString, response_deserializer=resp.FromString)(
        req, metadata=md, timeout=5)
    saga = call("BeginSaga", pb.BeginSagaRequest(request_id="pay-44", saga_type="order",
                                                 labels={"customer": "dave"}), pb.BeginSagaResponse)
    key = pb.StepKey(global_id=saga.global_id, service="payment", operation="charge",
                     phase=pb.PHASE_FORWARD)
    b = call("BeginStep", pb.BeginStepRequest(key=key, lease_ms=1000), pb.BeginStepResponse)
    print(f"charge of saga {saga.global_id}: attempt {b.attempt} began, never completed")
PY

q() { psql -X "$pg" -c "$1"; }
echo
echo "== orders (demo_order.orders)"
q "SELECT global_id, request_key, customer, sku, qty, amount_cents, status, reason FROM demo_order.orders ORDER BY id"
echo "== ledger (demo_payment.ledger) and accounts"
q "SELECT global_id, customer, kind, amount_cents, fence FROM demo_payment.ledger ORDER BY id"
q "SELECT * FROM demo_payment.accounts ORDER BY customer"
echo "== inventory (demo_inventory.stock, reservations)"
q "SELECT * FROM demo_inventory.stock ORDER BY sku"
q "SELECT global_id, sku, qty, state, fence FROM demo_inventory.reservations ORDER BY id"
echo "== barrier rows (one per executed step, in each service's own schema)"
q "SELECT 'order' AS service, global_id, operation, phase, fence, outcome, convert_from(body, 'UTF8') AS result FROM demo_order.idem_barrier
   UNION ALL SELECT 'payment', global_id, operation, phase, fence, outcome, convert_from(body, 'UTF8') FROM demo_payment.idem_barrier
   UNION ALL SELECT 'inventory', global_id, operation, phase, fence, outcome, convert_from(body, 'UTF8') FROM demo_inventory.idem_barrier
   ORDER BY 2, 1, 3, 4"
echo "== coordinator steps (idem_steps, tenant $tenant; phase 1 forward, 2 compensation;"
echo "   state 2 succeeded, 3 failed, 5 abandoned; attempt 0 = never executed)"
q "SELECT global_id, service, operation, phase, state, attempt, convert_from(body, 'UTF8') AS result
   FROM idem_steps WHERE tenant = '$tenant' ORDER BY global_id, created_ms, phase"
echo
echo "The stuck charge of scene 6 stays for on-call: start scripts/quickstart again and open"
echo "http://${IDEM_CONSOLE:-127.0.0.1:8080}/?tenant=$tenant (the web console), or run"
echo "idemctl --tenant $tenant steps --stuck"
