# scripts/lib/deps.sh — installs the Debian packages idem needs (apt-get, as root, no prompts).
IDEM_DEBS="build-essential cmake pkg-config libgrpc-dev protobuf-c-compiler libprotobuf-c-dev
  libpq-dev libinih-dev postgresql postgresql-client libcriterion-dev libssl-dev grpc-proto protobuf-compiler
  python3-grpcio python3-protobuf libmicrohttpd-dev libcjson-dev
  etcd-server libcurl4-openssl-dev openssl patroni python3-h2 iproute2 nftables faketime
  abi-dumper abi-compliance-checker prometheus curl
  mmdebstrap podman runc catatonit"
# the Java SDK and servlet filter (client-lib/java/deps.sh installs them; built offline with javac
# against /usr/share/java): JDK 17, gRPC Java 1.41 and what its jars load (Debian's libgrpc-java
# declares only opencensus: Netty, perfmark and gson are listed here), protobuf-java and the grpc
# protoc plugin, JUnit 5's console launcher, the Jakarta Servlet 5 API, embedded Tomcat 10 and the
# Jakarta annotations it loads (Debian's libtomcat10-embed-java does not depend on them); PostgreSQL's
# JDBC driver for the saga example's Java payment participant (saga-examples/payment-java)
IDEM_JAVA_DEBS="default-jdk-headless libgrpc-java libprotobuf-java protobuf-compiler-grpc-java-plugin
  libnetty-java libperfmark-java libgoogle-gson-java junit5 libjakarta-servlet-api-java libtomcat10-embed-java libjakarta-annotation-api-java
  libpostgresql-jdbc-java"
# scripts/fuzz only: clang 14 with libFuzzer and the sanitizer runtimes, llvm-symbolizer for traces
IDEM_FUZZ_DEBS="clang-14 libclang-rt-14-dev llvm-14"

# deps_debs [PACKAGE...]: installs those Debian packages that are missing (apt-get, as root, no
# prompts; a clear message naming them when not root). The SDKs' deps.sh use it too.
deps_debs() {
  local missing=""
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
  done
  [ -z "$missing" ] && return 0
  if [ "$(id -u)" != 0 ]; then
    echo "missing Debian packages:$missing (run as root, or: sudo apt-get install$missing)" >&2
    return 1
  fi
  echo "installing:$missing" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null
  # shellcheck disable=SC2086
  apt-get install -y -q --no-install-recommends $missing </dev/null >/dev/null
}

# deps_install [EXTRA_PACKAGE...]: IDEM_DEBS plus the extra packages (scripts/bench: pgbench).
deps_install() {
  # shellcheck disable=SC2086
  deps_debs $IDEM_DEBS "$@"
}

# deps_nodejs: Node.js and npm (Debian's, unless a node and npm are already on PATH).
deps_nodejs() {
  if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "installing: nodejs npm" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >/dev/null
    apt-get install -y -q --no-install-recommends nodejs npm </dev/null >/dev/null
  fi
}

# deps_compat: buf for .ci/compat/check wire (npm @bufbuild/buf at the version .ci/compat's lock
# file pins; abi-dumper and abi-compliance-checker, for the ABI check, are in IDEM_DEBS).
deps_compat() {
  deps_nodejs
  (cd "$1/.ci/compat" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
}

# deps_console: the console's browser tests (tests/console): Debian's chromium, and playwright-core
# from npm at the version its lock file pins (no browser download: the tests use /usr/bin/chromium).
deps_console() {
  deps_install chromium
  (cd "$1/tests/console" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error >/dev/null)
}
