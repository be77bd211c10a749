#!/usr/bin/env bash
# Builds and runs the libFuzzer targets (see README.md in this folder).
#
#   Fuzz/run.sh TARGET [SECONDS]   build and fuzz one target (default 60 s)
#   Fuzz/run.sh --smoke [SECONDS]  every target briefly (default 25 s each)
#   Fuzz/run.sh --build            build only
#
# Crashes, leaks and timeouts are written to Fuzz/crashes/TARGET/ (not tracked by git).
# Fix the bug, then move the input to Fuzz/regressions/TARGET/ and commit it: the ordinary
# test suite replays that folder (FuzzReplayTests). CI fails when Fuzz/crashes/ holds a file.
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$(cd .. && pwd)
OUT=out
TARGETS="value schema log snapshot store_open predicate ndjson context_ops"
mkdir -p "$OUT"

build() {
  # Several runs may start at once (one per core): one builds, the others wait for it.
  exec 9>"$OUT/.build.lock"
  if command -v flock >/dev/null; then flock 9; fi
  # The package's five library modules, each built once, in dependency order.
  local deps=""
  for module in CairnCollections CairnStorage Cairn CairnInterchange CairnTesting; do
    if [ ! -f "$OUT/$module.o" ] || [ -n "$(find "$ROOT/Sources/$module" -name '*.swift' -newer "$OUT/$module.o")" ] \
       || { [ -n "$deps" ] && [ -n "$(find $deps -newer "$OUT/$module.o")" ]; }; then
      echo "== building $module with -sanitize=fuzzer,address"
      swiftc -parse-as-library -module-name "$module" -package-name Cairn -emit-module -emit-module-path "$OUT/$module.swiftmodule" \
        -enable-testing -O -wmo -sanitize=fuzzer,address -swift-version 6 -I "$OUT" \
        $(find "$ROOT/Sources/$module" -name '*.swift' | sort) -c -o "$OUT/$module.o"
    fi
    deps="$deps $OUT/$module.o"
  done
  for target in $TARGETS; do
    if [ ! -x "$OUT/$target" ] || [ "targets/$target.swift" -nt "$OUT/$target" ] || [ -n "$(find $deps -newer "$OUT/$target")" ]; then
      echo "== building $target"
      swiftc -parse-as-library -package-name Cairn -O -sanitize=fuzzer,address -swift-version 6 -I "$OUT" \
        "targets/$target.swift" $deps -o "$OUT/$target"
    fi
  done
  exec 9>&-
}

fuzz() {
  local target=$1 seconds=$2
  mkdir -p "crashes/$target" "$OUT/corpus/$target"
  local dict=()
  [ -f "dictionaries/$target.dict" ] && dict=(-dict="dictionaries/$target.dict")
  echo "== fuzzing $target for ${seconds}s"
  SWIFT_BACKTRACE=enable=no "$OUT/$target" "$OUT/corpus/$target" "corpus/$target" "${dict[@]}" \
    -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -max_len=65536 \
    -artifact_prefix="crashes/$target/" -print_final_stats=1 2>&1 | tail -n 12
}

case "${1:-}" in
  --build) build ;;
  --smoke) build; for target in $TARGETS; do fuzz "$target" "${2:-25}"; done ;;
  "" ) echo "usage: Fuzz/run.sh TARGET [SECONDS] | --smoke [SECONDS] | --build" >&2; exit 2 ;;
  *) build; fuzz "$1" "${2:-60}" ;;
esac
