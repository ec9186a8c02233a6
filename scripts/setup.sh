#!/usr/bin/env bash
# Installs everything the tests need on a Debian 12 machine, as root:
#   - Apache ZooKeeper 3.8 (Debian package `zookeeper`, with its Java runtime),
#   - the Java Servlet API (Debian package `libservlet-api-java`: ZooKeeper's Jetty
#     AdminServer needs it, and Debian's zookeeper.jar does not list it; a test compares
#     wazoo's AdminServer with ZooKeeper's),
#   - BouncyCastle's provider (Debian package `libbcprov-java`: tests write BCFKS key
#     stores with keytool, and ZooKeeper reads them with it),
#   - libfaketime (Debian package `libfaketime`: a test steps a server's wall clock),
#   - ZooKeeper's C client (Debian package `libzookeeper-mt-dev`: a test compiles a
#     C client against it),
#   - Apache Curator (Debian packages `libcurator-framework-java`: a test drives
#     reconfiguration through its API, and `libcurator-recipes-java`: a test runs
#     its recipes and caches on both servers),
#   - Go and ZooKeeper's Go client (Debian packages `golang-go`,
#     `golang-github-samuel-go-zookeeper-dev`: a test compiles a Go client program and
#     examples/go/lock.go against it, offline, in GOPATH mode),
#   - nc and socat (Debian packages `netcat-openbsd`, `socat`: a test asks
#     four-letter words the way health probes do),
#   - the Python test dependencies pinned in tests/python/requirements.txt,
#   - the Python helper package clients/python (`wazoo_recipes`, for users; the tests
#     import it from the source tree),
#   - the Rust target wasm32-unknown-unknown.
# Idempotent: does nothing (and prints one line) when all is in place.
# Quiet: an installer's output is shown only if it fails, and then the script fails.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/python-env.sh
. "$REPO/scripts/python-env.sh"

say() { printf 'setup: %s\n' "$*"; }
die() { printf 'setup: ERROR: %s\n' "$*" >&2; exit 1; }

# Runs a command with its output kept in a temporary file, shown on failure.
quietly() {
  local out rc=0
  out="$(mktemp)"
  "$@" >"$out" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ]; then
    printf 'setup: ERROR: `%s` failed (exit %s):\n' "$*" "$rc" >&2
    tail -n 60 "$out" >&2
    rm -f "$out"
    exit "$rc"
  fi
  rm -f "$out"
}

[ "$(id -u)" -eq 0 ] || die "run as root (apt-get install needs it)"

# Installs Debian package $1 unless it is installed; $2 says what it is for.
install_deb() {
  if ! dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; then
    say "installing the Debian package $1 ($2)"
    export DEBIAN_FRONTEND=noninteractive
    # Wait for another apt/dpkg run (up to 10 min) instead of failing on its lock.
    local apt_opts=(-q -o DPkg::Lock::Timeout=600)
    quietly apt-get "${apt_opts[@]}" update
    quietly apt-get "${apt_opts[@]}" install -y "$1"
  fi
}

# --- Apache ZooKeeper (Debian package) --------------------------------------------------
install_deb zookeeper "Apache ZooKeeper 3.8 and a Java runtime"
[ -f /usr/share/java/zookeeper.jar ] || die "/usr/share/java/zookeeper.jar missing after installing zookeeper"
command -v java >/dev/null || die "java not found after installing zookeeper"
install_deb libservlet-api-java "ZooKeeper's AdminServer (Jetty) loads the servlet API"
[ -f /usr/share/java/servlet-api.jar ] || die "/usr/share/java/servlet-api.jar missing after installing libservlet-api-java"
install_deb libbcprov-java "BouncyCastle's provider: keytool writes BCFKS stores with it, and ZooKeeper reads them"
[ -f /usr/share/java/bcprov.jar ] || die "/usr/share/java/bcprov.jar missing after installing libbcprov-java"

# --- libfaketime (Debian package) -------------------------------------------------------
install_deb libfaketime "a test steps a server's wall clock"
ls /usr/lib/*/faketime/libfaketimeMT.so.1 >/dev/null 2>&1 \
  || die "libfaketimeMT.so.1 missing after installing libfaketime"

# --- ZooKeeper's C client (Debian package) ----------------------------------------------
install_deb libzookeeper-mt-dev "a test compiles a C client against it"
[ -f /usr/include/zookeeper/zookeeper.h ] \
  || die "zookeeper/zookeeper.h missing after installing libzookeeper-mt-dev"
command -v cc >/dev/null || die "cc not found (the C client test compiles with it)"

# --- Apache Curator (Debian package) -----------------------------------------------------
install_deb libcurator-framework-java "a test drives reconfiguration through Curator's API"
[ -f /usr/share/java/curator-framework.jar ] && [ -f /usr/share/java/curator-client.jar ] \
  || die "Curator's jars missing after installing libcurator-framework-java"
install_deb libcurator-recipes-java "a test runs Curator's recipes and caches on both servers"
[ -f /usr/share/java/curator-recipes.jar ] \
  || die "curator-recipes.jar missing after installing libcurator-recipes-java"
command -v javac >/dev/null || die "javac not found (the Curator test compiles with it)"

# --- Go and ZooKeeper's Go client (Debian packages) --------------------------------------
install_deb golang-go "a test compiles a Go client program with it"
install_deb golang-github-samuel-go-zookeeper-dev "ZooKeeper's Go client, for that program"
command -v go >/dev/null || die "go not found after installing golang-go"
[ -f /usr/share/gocode/src/github.com/samuel/go-zookeeper/zk/conn.go ] \
  || die "the Go client's sources missing after installing golang-github-samuel-go-zookeeper-dev"

# --- nc and socat (Debian packages) ----------------------------------------------------
install_deb netcat-openbsd "a test asks four-letter words with \`echo ruok | nc\`, as probes do"
install_deb socat "a test asks four-letter words with socat, as probes do"
command -v nc >/dev/null && command -v socat >/dev/null || die "nc or socat not found after installing them"

# --- Python test dependencies -----------------------------------------------------------
pick_python "$REPO" yes
REQUIREMENTS="$REPO/tests/python/requirements.txt"
if ! "$PYTHON" - "$REQUIREMENTS" <<'PY'
# Exit 0 if every `name==version` line of the requirements file is installed.
import sys
from importlib.metadata import PackageNotFoundError, version
for line in open(sys.argv[1]):
    line = line.split("#")[0].strip()
    if not line:
        continue
    name, _, wanted = line.partition("==")
    try:
        if version(name.strip()) != wanted.strip():
            sys.exit(1)
    except PackageNotFoundError:
        sys.exit(1)
PY
then
  say "pip installing $(grep -v '^#' "$REQUIREMENTS" | xargs) into $PYTHON"
  quietly "$PYTHON" -m pip install -q --disable-pip-version-check --root-user-action=ignore \
    -r "$REQUIREMENTS"
fi

# --- wazoo_recipes (clients/python) ----------------------------------------------------
WANT_RECIPES="$(sed -n 's/^version = "\(.*\)"$/\1/p' "$REPO/clients/python/pyproject.toml")"
HAVE_RECIPES="$("$PYTHON" -c 'from importlib.metadata import version; print(version("wazoo-recipes"))' \
  2>/dev/null || true)"
if [ "$HAVE_RECIPES" != "$WANT_RECIPES" ]; then
  say "pip installing wazoo-recipes $WANT_RECIPES (clients/python) into $PYTHON"
  quietly "$PYTHON" -m pip install -q --disable-pip-version-check --root-user-action=ignore \
    "$REPO/clients/python"
fi

# --- Rust ------------------------------------------------------------------------------
command -v cargo >/dev/null || die "cargo not found (the machine's Rust toolchain comes from rustup)"
if command -v rustup >/dev/null; then
  if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
    say "adding the Rust target wasm32-unknown-unknown"
    quietly rustup target add wasm32-unknown-unknown
  fi
  # scripts/test.sh's lint gates.
  for component in rustfmt clippy; do
    if ! rustup component list --installed | grep -q "^$component"; then
      say "adding the Rust component $component"
      quietly rustup component add "$component"
    fi
  done
else
  say "warning: rustup not found; cannot check the wasm32-unknown-unknown target"
fi

say "ok (zookeeper $(dpkg-query -W -f='${Version}' zookeeper), python $("$PYTHON" -c 'import platform; print(platform.python_version())'), $(rustc --version))"
