#!/usr/bin/env bash
# The sync example end to end (CI runs it): PostgreSQL from Debian's packages, an app
# writing 10,000 changes with deletes and compactions in two runs, the consumer following
# the second as a reader, killed with SIGKILL in the middle and started again, then the
# table compared with `cairn export` row by row.
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! command -v pg_ctlcluster >/dev/null; then
  echo "installing PostgreSQL (Debian's packages)"
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
fi
version=$(ls /usr/lib/postgresql | sort -n | tail -1)
pg_ctlcluster "$version" main start 2>/dev/null || true
user=$(id -un)
su postgres -c "createuser --superuser $user" 2>/dev/null || true
database=cairn_sync_example
dropdb --if-exists "$database"
createdb "$database"

swift build --product cairn-pg-sync >/dev/null
swift build --product cairn >/dev/null
bin=$(swift build --show-bin-path)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
store="$work/store"

"$bin/cairn-pg-sync" generate "$store" 5000 1 >/dev/null
"$bin/cairn-pg-sync" sync "$store" "$database" >"$work/first.log" &
consumer=$!
"$bin/cairn-pg-sync" generate "$store" 5000 2 >"$work/token" &
writer=$!
# The consumer is killed once it has applied a batch, while the app still writes.
for _ in $(seq 1 400); do grep -q synced "$work/first.log" && break; sleep 0.01; done
kill -9 "$consumer" 2>/dev/null || true
wait "$consumer" 2>/dev/null || true
writing=$(kill -0 "$writer" 2>/dev/null && echo "while the app was writing" || echo "after the app finished")
wait "$writer"
final=$(sed 's/.*://' "$work/token")
echo "consumer killed with SIGKILL $writing, at: $(tail -1 "$work/first.log" || true) of $final"
"$bin/cairn-pg-sync" sync "$store" "$database" "$final" | tail -1
"$bin/cairn" export "$store" --entity Note >"$work/export.ndjson"
"$bin/cairn-pg-sync" compare "$work/export.ndjson" "$database"
dropdb "$database"
