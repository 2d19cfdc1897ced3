#!/usr/bin/env bash
# Where a consume's instructions go: callgrind instructions per operation of a fixed_window
# consume (in memory, 1,000 owners) and of the same statement with one part taken away at a
# time, down to SQLite's floor, the bare upsert; then the narrowest state row, keyed by the
# owner's text and by an integer owner id. The consume's variants are made here from the
# text that `quotactl sql consume` prints, so the table can be reproduced after any change:
#
#   bench/scripts/bench-floors.sh              # prints a markdown table (about 3 minutes)
#   bench/scripts/bench-floors.sh --keep DIR   # also keeps the statement variants in DIR
#
# Each figure comes from bench/scripts/bench-instructions.sh (one process per variant, setup and
# warm-up not counted), on copies of the same template databases.
set -euo pipefail
cd "$(dirname "$0")/../.."

keep=""
while (($#)); do
  case "$1" in
    --keep) keep=$2; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-floors: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
variants=${keep:-$work/variants}
mkdir -p "$variants"

consume=consume/fixed_window/memory/1000
count() {  # count CASE [bench-instructions options...] -> Ir per operation
  local name=$1
  shift
  bench/scripts/bench-instructions.sh --work-dir "$work/templates" "$@" "$name" | awk '{print $2}'
}

# The templates, and the statement the library runs, printed from a copy of the template.
count "$consume" --operations 1000 >/dev/null
cp "$work/templates/engine_1000.db" "$work/statement.db"
build/release/tools/quotactl/quotactl --db "$work/statement.db" sql consume bench_fixed_window |
  grep -v '^--' >"$variants/consume.sql"
sed '/^RETURNING/,$d' "$variants/consume.sql" >"$variants/consume_no_returning.sql"
echo "DROP TRIGGER quota_windows_new_owner;" >"$variants/no_trigger.sql"
cat >"$variants/plus_one.sql" <<'EOF'
INSERT INTO quota_windows (limit_name, owner, cost, seen_ms, maximum)
VALUES (:limit, :owner, coalesce(:cost, 1), :now, 0)
ON CONFLICT (limit_name, owner) DO UPDATE SET used = used + 1
EOF
# The least a fixed_window decision can be on this table: no policies, no shadow mode, the
# limit's numbers read from the owner's own row, one flat SELECT; the same answer columns.
cat >"$variants/least_decision.sql" <<'EOF'
INSERT INTO quota_windows (limit_name, owner, cost, seen_ms, maximum)
VALUES (:limit, :owner, coalesce(:cost, 1), :now, 0)
ON CONFLICT (limit_name, owner) DO UPDATE SET
  (window_key, used, denied, seen_ms, cost, last_allowed, last_reason, last_remaining,
   last_retry_after_ms, last_reset_at_ms) =
  (SELECT k, u + ok * c, denied + 1 - ok, t, c, ok,
          CASE WHEN ok THEN 'ok' ELSE 'rate_limited' END, maximum - u - ok * c,
          CASE WHEN ok THEN 0 ELSE (k + 1) * period_ms - t END, (k + 1) * period_ms
   FROM (SELECT k, t, c, u, u + c <= maximum AS ok
         FROM (SELECT k, t, c, CASE WHEN window_key = k THEN used ELSE 0 END AS u
               FROM (SELECT t / period_ms AS k, t, excluded.cost AS c
                     FROM (SELECT max(excluded.seen_ms, seen_ms) AS t)))))
RETURNING last_allowed AS allowed, last_reason AS reason, last_remaining AS remaining,
  last_retry_after_ms AS retry_after_ms, last_reset_at_ms AS reset_at_ms, denied,
  last_allowed AND last_reason <> 'ok' AS shadow_denied
EOF
cat >"$variants/text_upsert_no_returning.sql" <<'EOF'
INSERT INTO text_counters (key, count) VALUES (:owner, 1)
ON CONFLICT (key) DO UPDATE SET count = count + 1
EOF

# Integer owner ids: the narrowest state (upsert_narrow's table) keyed by an integer owner id
# instead of the owner's text, the id looked up by the owner in a table of its own (a rowid
# table with the owner UNIQUE, or WITHOUT ROWID keyed by the owner), inside the same upsert.
id_state() {  # the state table keyed by owner id, from narrow_state and owner_ids
  cat <<'EOF'
CREATE TABLE id_state (
  owner_id INTEGER NOT NULL, limit_id INTEGER NOT NULL, window_key INTEGER NOT NULL,
  used INTEGER NOT NULL, previous_used INTEGER NOT NULL, denied INTEGER NOT NULL,
  answer INTEGER NOT NULL, PRIMARY KEY (owner_id, limit_id)
) STRICT, WITHOUT ROWID;
INSERT INTO id_state SELECT o.id, limit_id, window_key, used, previous_used, denied, answer
  FROM narrow_state JOIN owner_ids AS o USING (owner);
EOF
}
{
  echo "CREATE TABLE owner_ids (id INTEGER PRIMARY KEY, owner TEXT NOT NULL UNIQUE);"
  echo "INSERT INTO owner_ids (owner) SELECT owner FROM narrow_state;"
  id_state
} >"$variants/owner_ids_rowid.sql"
{
  echo "CREATE TABLE owner_ids (owner TEXT PRIMARY KEY, id INTEGER NOT NULL UNIQUE) WITHOUT ROWID;"
  echo "INSERT INTO owner_ids (owner, id) SELECT owner, row_number() OVER () FROM narrow_state;"
  id_state
} >"$variants/owner_ids_keyed.sql"
cat >"$variants/owner_id_upsert.sql" <<'EOF'
INSERT INTO id_state (owner_id, limit_id, window_key, used, previous_used, denied, answer)
VALUES ((SELECT id FROM owner_ids WHERE owner = :owner), 1, 0, 1, 0, 0, 0)
ON CONFLICT (owner_id, limit_id) DO UPDATE SET used = used + 1 RETURNING used
EOF

floor=$(count upsert_int/memory/1000)
row() {  # row LABEL IR
  awk -v label="$1" -v ir="$2" -v floor="$floor" \
    'BEGIN { printf "| %s | %.1fk | %.2f |\n", label, ir / 1000, ir / floor }'
}
echo "| what is counted | Ir per operation | × the bare integer-key upsert |"
echo "|---|---:|---:|"
row "\`Engine::consume\` (\`$consume\`)" "$(count "$consume")"
row "its statement (\`quotactl sql consume\`) through the C API" \
  "$(count "$consume" --statement "$variants/consume.sql")"
row "… without \`RETURNING\`" "$(count "$consume" --statement "$variants/consume_no_returning.sql")"
row "… with the new-owner trigger dropped (every owner exists)" \
  "$(count "$consume" --statement "$variants/consume.sql" --setup "$variants/no_trigger.sql")"
row "… without both" "$(count "$consume" --statement "$variants/consume_no_returning.sql" \
  --setup "$variants/no_trigger.sql")"
row "the least fixed_window decision on this table, no trigger (\`least_decision.sql\`)" \
  "$(count "$consume" --statement "$variants/least_decision.sql" \
    --setup "$variants/no_trigger.sql")"
row "\`SET used = used + 1\` on this table, no trigger, no \`RETURNING\`" \
  "$(count "$consume" --statement "$variants/plus_one.sql" --setup "$variants/no_trigger.sql")"
row "the bare text-key upsert without \`RETURNING\`" \
  "$(count upsert_text/memory/1000 --statement "$variants/text_upsert_no_returning.sql")"
row "the bare text-key upsert (\`upsert_text\`)" "$(count upsert_text/memory/1000)"
row "the bare integer-key upsert (\`upsert_int\`), the floor" "$floor"
row "the narrowest state, keyed by the owner's text (\`upsert_narrow\`)" \
  "$(count upsert_narrow/memory/1000)"
row "… keyed by an integer owner id, looked up in a rowid table (\`owner_ids_rowid.sql\`)" \
  "$(count upsert_narrow/memory/1000 --statement "$variants/owner_id_upsert.sql" \
    --setup "$variants/owner_ids_rowid.sql")"
row "… looked up in a \`WITHOUT ROWID\` table keyed by the owner (\`owner_ids_keyed.sql\`)" \
  "$(count upsert_narrow/memory/1000 --statement "$variants/owner_id_upsert.sql" \
    --setup "$variants/owner_ids_keyed.sql")"
