#!/usr/bin/env bash
# Compiles the wazoo recipes helper (package io.wazoo.recipes) against
# Debian's ZooKeeper and Curator jars and writes OUT_DIR/wazoo-recipes.jar.
#
#   clients/java/build.sh [OUT_DIR]     # default: target/java (of the repository)
#
# Needs a JDK (javac, jar; 11 or later) and /usr/share/java/zookeeper.jar,
# zookeeper-jute.jar, curator-framework.jar, curator-client.jar (Debian's
# zookeeper and libcurator-framework-java, which scripts/setup.sh installs);
# JAVA_CLASSPATH overrides where they are (colon-separated).
# Idempotent: it rebuilds from scratch into a fresh directory each time
# and replaces the jar in one rename.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
OUT="${1:-$REPO/target/java}"
J=/usr/share/java
CP="${JAVA_CLASSPATH:-$J/zookeeper.jar:$J/zookeeper-jute.jar:$J/curator-framework.jar:$J/curator-client.jar}"
IFS=: read -r -a jars <<<"$CP"
for jar in "${jars[@]}"; do
  if [ ! -f "$jar" ]; then
    echo "build.sh: $jar is missing (install zookeeper and libcurator-framework-java: scripts/setup.sh)" >&2
    exit 1
  fi
done
command -v javac >/dev/null || { echo "build.sh: no javac (a JDK is needed)" >&2; exit 1; }
mkdir -p "$OUT"
work="$(mktemp -d "$OUT/.build.XXXXXX")"
trap 'rm -rf "$work"' EXIT
mkdir "$work/classes"
find "$HERE/src" -name '*.java' | sort >"$work/sources"
javac --release 11 -Xlint:all,-path -Werror -encoding UTF-8 -cp "$CP" -d "$work/classes" @"$work/sources"
jar --create --file "$work/wazoo-recipes.jar" -C "$work/classes" .
mv -f "$work/wazoo-recipes.jar" "$OUT/wazoo-recipes.jar"
echo "$OUT/wazoo-recipes.jar"
