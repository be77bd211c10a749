#!/usr/bin/env bash
# The public boundary, checked as an app outside the package sees it:
# 1. .ci/api/App.swift, an app's use of the documented API, type-checks against the
#    built modules with `import Cairn` alone;
# 2. each file of .ci/api/hidden/ names one thing that is `package` (the store, its
#    records and changes, the shared tables, the NDJSON and terminal code) and must not;
#    and `Sources/Cairn` names no raw memory (ARCHITECTURE.md, "The one door");
# 3. the DocC catalog builds with the toolchain's `docc`, warnings as errors, so a
#    broken symbol link fails CI; the public symbol count is printed.
# Builds (debug) first if the sources changed.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! built=$(swift build 2>&1); then echo "$built" >&2; exit 1; fi
modules=$(swift build --show-bin-path)/Modules
[ -d "$modules" ] || { echo "no modules at $modules: run swift build first" >&2; exit 1; }
typecheck() { swiftc -typecheck -swift-version 6 -module-name App -I "$modules" "$@"; }

echo "-- an app's use of the public API type-checks"
typecheck .ci/api/App.swift

echo "-- what is package stays out of reach"
for file in .ci/api/hidden/*.swift; do
  if output=$(typecheck "$file" 2>&1); then
    echo "public API leak: $file type-checks outside the package" >&2; exit 1
  fi
  grep -q "error:" <<<"$output" || { echo "$file failed without a compiler error:" >&2; echo "$output" >&2; exit 1; }
  echo "   $(basename "$file" .swift): $(grep -m1 -o "error: .*" <<<"$output")"
done

echo "-- above the store: no raw memory, no raw record bytes (StoredRecord and CairnCollections hold them)"
if grep -rnE 'Unmanaged|\.allocate\(|UnsafeMutablePointer|UnsafeMutableRawPointer|UnsafeRawBufferPointer|copyMemory|memcmp\(' \
     --include='*.swift' Sources/Cairn | grep -vE '^[^:]+:[0-9]+:\s*//'; then
  echo "raw memory above the store: use StoredRecord or a CairnCollections type" >&2; exit 1
fi

echo "-- the catalog builds without warnings"
docs=$(mktemp -d)
trap 'rm -rf "$docs"' EXIT
mkdir -p "$docs/graphs"
# One module as an app sees it: Cairn with the storage types it re-exports.
bin=$(dirname "$(readlink -f "$(command -v swift)")")
triple=$(swift -print-target-info | python3 -c 'import json, sys; print(json.load(sys.stdin)["target"]["triple"])')
"$bin/swift-symbolgraph-extract" -module-name Cairn -target "$triple" -I "$modules" -minimum-access-level public \
  -experimental-allowed-reexported-modules=CairnStorage -output-dir "$docs/graphs"
python3 - "$docs/graphs/Cairn.symbols.json" <<'PY'
import json, sys
print(f"   public symbols of Cairn (storage types included): {len(json.load(open(sys.argv[1]))['symbols'])}")
PY
docc=$(command -v docc || echo "$bin/docc")
"$docc" convert Sources/Cairn/Cairn.docc --additional-symbol-graph-dir "$docs/graphs" \
  --fallback-display-name Cairn --fallback-bundle-identifier org.cairn.Cairn \
  --output-path "$docs/Cairn.doccarchive" --warnings-as-errors
echo "public API: ok"
