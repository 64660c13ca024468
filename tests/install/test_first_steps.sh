#!/usr/bin/env bash
# tests/install/test_first_steps.sh BUILD — the README's first five minutes, as a new user follows
# them, in a copy of the checkout made a git repository of its own: scripts/quickstart (no build:
# the stand-in cmake of first_hour_lib.sh installs BUILD), the export lines it prints, `idemctl
# status`, then the step examples' commands taken from the README's step 4 block, in its order
# (C, Go, Python, Node, Java), each run twice: the first run prints "ran" then "replayed", the
# second "replayed" and no "ran" (their own order ids and services, so that one run does not make
# the next example's look broken); the five print the same lines on each run (their standard
# output compared with the C example's, line by line, after the example's own language name,
# service, order id and the saga's global id are made neutral: a drift in any one fails the
# test, the difference shown); `idemctl --tenant shop steps` shows all five services; the
# README's SDK snippets compile (Go, TypeScript, Python); Ctrl-C; and `git status --porcelain`
# of the copy is empty afterwards (nothing built into the tree).
# Not run: step 3, `scripts/quickstart --demo` (it needs quickstart's own build).
set -euo pipefail
build=$(cd "${1:?usage: test_first_steps.sh BUILD_DIR}" && pwd)
src=${IDEM_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
work=$(mktemp -d /tmp/idem-first-steps.XXXXXX)
chmod 755 "$work"
fail() { echo "test_first_steps: FAILED: $*" >&2; exit 1; }
# shellcheck source=tests/install/first_hour_lib.sh
. "$src/tests/install/first_hour_lib.sh"
cleanup() {
  qs_stop
  rm -rf "$work"
}
trap cleanup EXIT

# the checkout as a new user would clone it: the tracked and untracked-but-not-ignored files of
# $src (its build folders, .idem-dev and node_modules are not copied), committed in a new repository
copy="$work/idem"
mkdir -p "$copy"
if git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  (cd "$src" && git ls-files -z -co --exclude-standard |
    tar --null -T - --ignore-failed-read -cf - 2>/dev/null) | tar -xf - -C "$copy"
else
  tar -C "$src" --exclude='./build*' --exclude=./.idem-dev --exclude=node_modules --exclude=.git \
    -cf - . | tar -xf - -C "$copy"
fi
git -C "$copy" init -q
git -C "$copy" add -A
git -C "$copy" -c user.name=test -c user.email=test@localhost commit -qm "the checkout" --no-gpg-sign
[ -z "$(git -C "$copy" status --porcelain)" ] || fail "the copy is not clean before the README's steps"

# 1. scripts/quickstart, left in the foreground (here: in the background, its own process group)
qs_standin "$build"
listen="127.0.0.1:$(free_port)"
qs_start "$copy" "" "$listen" "127.0.0.1:$(free_port)" "$work/quickstart.out"
echo "quickstart: the coordinator answers on $listen"
# ... "prints an export PKG_CONFIG_PATH=… and an export PATH=… line: paste both"
exports=$(grep -E '^ *export (PKG_CONFIG_PATH|PATH)=' "$work/quickstart.out") ||
  fail "quickstart printed no export lines: $(cat "$work/quickstart.out")"
[ "$(wc -l <<<"$exports")" = 2 ] || fail "expected two export lines, got: $exports"
eval "$exports"
export IDEM_ADDRESS="$listen" IDEM_GO_BUILD_DIR="$work/go" IDEM_JAVA_BUILD_DIR="$work/java"
# the Go build cache is the suite's (go_sdk's and the HTTP examples'): grpc-go is compiled once a
# run, not again here; the example and the snippets still build in this copy's GOPATH
export IDEM_GOCACHE="$build/go/gocache"
unset IDEM_TENANT LD_LIBRARY_PATH

# 2. idemctl status: one row, LEADER yes, STORE ok
[ "$(command -v idemctl)" = "$copy/.idem-dev/prefix/bin/idemctl" ] ||
  fail "the pasted PATH does not find quickstart's idemctl: $(command -v idemctl)"
out=$(idemctl status 2>&1) || fail "idemctl status: $out"
if ! grep -q yes <<<"$out" || ! grep -q ok <<<"$out"; then fail "idemctl status: $out"; fi

# 4. the step examples: the commands of the README's step 4 block, in its order
cmds=$(awk '/^\*\*4\. Your first step/ { on = 1 } on && /^```sh/ { inblock = 1; next }
  inblock && /^```/ { exit } inblock && !/^#/ && NF' "$copy/README.md")
[ "$(wc -l <<<"$cmds")" = 5 ] || fail "the README's step 4 block: expected 5 commands, got: $cmds"
want=(c go python node java)
pat=('examples/c/step.c' 'examples/go/run.sh' 'examples/python/step.py' 'examples/node/step.js'
  'examples/java/run.sh')
# normalize NAME: an example's standard output with what may differ between the five made
# neutral: the saga's global id (a UUID), its service and order id (payment-NAME, order-NAME-1)
# and its language's name as a word (any case)
normalize() {
  sed -E -e 's/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/GLOBAL-ID/g' \
    -e "s/\\b(payment|order)-$1\\b/\\1-LANG/g" -e "s/\\b$1\\b/LANG/gI"
}
mkdir -p "$work/lines"
i=0
while IFS= read -r cmd; do
  name=${want[$i]}
  grep -qE -- "${pat[$i]}" <<<"$cmd" || fail "README order: command $((i + 1)) should be the $name example: $cmd"
  # the C example's binary goes to /tmp in the README; here to this test's folder
  cmd=${cmd//\/tmp\/idem-step/$work/idem-step}
  for run in 1 2; do
    t0=$SECONDS
    rc=0
    err="$work/lines/$name.$run.stderr"
    out=$(cd "$copy" && bash -c "$cmd" 2>"$err") || rc=$?
    [ "$rc" = 0 ] || { echo "$out" >&2; cat "$err" >&2; fail "$name example, run $run: exit $rc ($cmd)"; }
    normalize "$name" <<<"$out" >"$work/lines/$name.$run"
    lines=$(grep -E '^(ran|replayed)' <<<"$out" | cut -d: -f1 | tr '\n' ' ')
    if [ "$run" = 1 ]; then
      [ "$lines" = "ran replayed " ] || { echo "$out" >&2; fail "$name example, first run: '$lines', expected 'ran replayed'"; }
    else
      [ "$lines" = "replayed replayed " ] || { echo "$out" >&2; fail "$name example, second run: '$lines', expected 'replayed replayed'"; }
    fi
    echo "$name example, run $run ($((SECONDS - t0)) s): $lines"
  done
  [ "$name" != c ] || grep -q 'outcome succeeded' <<<"$out" || fail "the C example does not name the outcome: $out"
  i=$((i + 1))
done <<<"$cmds"

# the same lines from all five, on each run: each example's against the C example's
for run in 1 2; do
  for name in go python node java; do
    if ! d=$(diff -u --label "c, run $run" --label "$name, run $run" "$work/lines/c.$run" "$work/lines/$name.$run"); then
      echo "$d" >&2
      fail "the $name example's lines differ from the C example's on run $run (above, normalized: LANG, GLOBAL-ID)"
    fi
  done
done
echo "the five examples printed the same $(wc -l <"$work/lines/c.1") lines on run 1 and $(wc -l <"$work/lines/c.2") on run 2:"
sed 's/^/  /' "$work/lines/c.1" "$work/lines/c.2"

# the README: "To see the steps as an operator … idemctl --tenant shop steps"
grep -qF 'idemctl --tenant shop steps' "$copy/README.md" || fail "the README no longer names idemctl --tenant shop steps"
out=$(idemctl --tenant shop steps 2>&1) || fail "idemctl --tenant shop steps: $out"
for svc in payment-c payment-go payment-python payment-node payment-java; do
  grep -q -- "$svc" <<<"$out" || fail "idemctl --tenant shop steps does not show $svc: $out"
done
echo "idemctl --tenant shop steps: payment-c, payment-go, payment-python, payment-node, payment-java"

# the README's SDK snippets compile as written: Go with go.sh (GOPATH mode, offline), TypeScript with
# tsc against client-lib/node after the README's `npm ci && npm pack` there, Python with py_compile
snip="$work/snippets"
mkdir -p "$snip/go"
/usr/bin/python3 - "$copy/README.md" "$snip" <<'PY'
import re, sys
readme, out = sys.argv[1:]
s = open(readme).read()
sec = s[s.index("## From Go, TypeScript, Python and Java"):]
sec = sec[:sec.index("\n## ", 4)]
for lang, path in (("go", "go/snippet.go"), ("ts", "snippet.ts"), ("python", "snippet.py")):
    blocks = re.findall(r"```" + lang + r"\n(.*?)```", sec, re.S)
    if len(blocks) != 1:
        sys.exit(f"the README's SDK section: {len(blocks)} {lang} snippets, expected 1")
    open(f"{out}/{path}", "w").write(blocks[0])
PY
"$copy/client-lib/go/go.sh" "$IDEM_GO_BUILD_DIR" vet "$snip/go/snippet.go" >"$snip/go.out" 2>&1 ||
  fail "the README's Go snippet does not compile: $(cat "$snip/go.out")"
npmcmd=$(grep -o 'cd client-lib/node && npm ci && npm pack' "$copy/README.md") ||
  fail "the README no longer says: cd client-lib/node && npm ci && npm pack"
(cd "$copy" && bash -c "$npmcmd --silent") >"$snip/npm.out" 2>&1 || fail "$npmcmd: $(cat "$snip/npm.out")"
node_dir="$copy/client-lib/node"
cat >"$snip/tsconfig.json" <<JSON
{ "compilerOptions": { "target": "ES2020", "module": "commonjs", "strict": true, "esModuleInterop": true,
    "noEmit": true, "skipLibCheck": true, "baseUrl": ".", "types": ["node"],
    "typeRoots": ["$node_dir/node_modules/@types"],
    "paths": { "idem-client": ["$node_dir/dist/index.d.ts"], "*": ["$node_dir/node_modules/*", "$node_dir/node_modules/@types/*"] } },
  "files": ["snippet.ts"] }
JSON
"$node_dir/node_modules/.bin/tsc" -p "$snip/tsconfig.json" >"$snip/ts.out" 2>&1 ||
  fail "the README's TypeScript snippet does not compile: $(cat "$snip/ts.out")"
/usr/bin/python3 -m py_compile "$snip/snippet.py" 2>"$snip/py.out" ||
  fail "the README's Python snippet does not compile: $(cat "$snip/py.out")"
echo "the README's Go, TypeScript and Python snippets compile"

# Ctrl-C; then nothing the README's steps did is left in the checkout
qs_stop
status=$(git -C "$copy" status --porcelain)
[ -z "$status" ] || fail "git status --porcelain after the README's first five minutes: $status"
echo "test_first_steps: ok (quickstart, idemctl status, the C, Go, Python, Node and Java examples each ran then replayed, the same lines from all five; git status clean)"
