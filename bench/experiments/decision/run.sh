#!/usr/bin/env bash
# Counts (callgrind, instructions per operation) the baselines and every statement variant of
# this folder, in one run: bench/experiments/decision/run.sh [--operations N] [VARIANT...]
# (docs/performance-notes.md, "One decision per limit's configuration"). Each line of
# VARIANTS below is: label, setup file (- for none), statement file, quota-bench case.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
operations=5000
if [ "${1:-}" = "--operations" ]; then operations=$2; shift 2; fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
count() {  # label setup statement case
  local args=(--work-dir "$work" --operations "$operations")
  [ "$2" != - ] && args+=(--setup "$here/$2")
  [ "$3" != - ] && args+=(--statement "$here/$3")
  local figure
  figure=$(bench/scripts/bench-instructions.sh "${args[@]}" "$4" | awk '{print $2}')
  printf '%-44s %9s Ir/op\n' "$1" "$figure"
}
VARIANTS=(
  "baseline:upsert_int - - upsert_int/memory/1000"
  "baseline:upsert_text - - upsert_text/memory/1000"
  "baseline:select_text - - select_text/memory/1000"
  "baseline:article - - article/memory/1000"
  "baseline:upsert_state - - upsert_state/memory/1000"
  "engine:consume/fixed_window - - consume/fixed_window/memory/1000"
  "engine:consume/token_bucket - - consume/token_bucket/memory/1000"
  "engine:consume/sliding_window - - consume/sliding_window/memory/1000"
  "engine:consume/sliding_log - - consume/sliding_log/memory/1000"
  "engine:check/fixed_window - - check/fixed_window/memory/1000"
  "engine:check/token_bucket - - check/token_bucket/memory/1000"
  "engine:check/sliding_window - - check/sliding_window/memory/1000"
  "engine:check/sliding_log - - check/sliding_log/memory/1000"
  "engine:consume/fixed_window/block - - consume/fixed_window/memory/1000/block"
  "fixed:update_existing - fixed_update_existing.sql consume/fixed_window/memory/1000"
  "fixed:plain - plain_fixed.sql consume/fixed_window/memory/1000"
  "fixed:plain_no_cost - plain_fixed_no_cost.sql consume/fixed_window/memory/1000"
  "fixed:plain_state_only - plain_fixed_state_only.sql consume/fixed_window/memory/1000"
  "fixed:update_existing_answer - fixed_update_existing_answer.sql consume/fixed_window/memory/1000"
  "fixed:update_existing_plain - fixed_update_existing_plain.sql consume/fixed_window/memory/1000"
  "fixed:update_rowid_guarded setup_windows_rowid.sql fixed_update_guarded.sql consume/fixed_window/memory/1000"
  "fixed:update_keyed setup_windows_keyed.sql fixed_update.sql consume/fixed_window/memory/1000"
  "fixed:update_owner_first setup_windows_owner_first.sql fixed_update.sql consume/fixed_window/memory/1000"
  "fixed:update_rowid setup_windows_rowid.sql fixed_update.sql consume/fixed_window/memory/1000"
  "fixed:upsert_values_keyed setup_windows_keyed.sql fixed_upsert_values.sql consume/fixed_window/memory/1000"
  "fixed:insert_select_keyed setup_windows_keyed.sql fixed_insert_select.sql consume/fixed_window/memory/1000"
  "sliding:update_keyed setup_windows_keyed.sql sliding_update.sql consume/sliding_window/memory/1000"
  "sliding:update_rowid setup_windows_rowid.sql sliding_update.sql consume/sliding_window/memory/1000"
  "bucket:update_rowid setup_buckets_rowid.sql bucket_update.sql consume/token_bucket/memory/1000"
  "log:update_rowid setup_log_rowid.sql log_update.sql consume/sliding_log/memory/1000"
  "fixed:update_general_parts - fixed_update_general_parts.sql consume/fixed_window/memory/1000"
  "check:fixed_barrier_keyed setup_windows_keyed.sql check_fixed_barrier.sql check/fixed_window/memory/1000"
  "check:bare_join_wide_keyed setup_windows_keyed.sql check_bare_join_wide.sql check/fixed_window/memory/1000"
  "bucket:update_keyed setup_buckets_keyed.sql bucket_update.sql consume/token_bucket/memory/1000"
  "log:update_keyed setup_log_keyed.sql log_update.sql consume/sliding_log/memory/1000"
  "check:fixed_keyed setup_windows_keyed.sql check_fixed.sql check/fixed_window/memory/1000"
  "check:bare_state_keyed setup_windows_keyed.sql check_bare_state.sql check/fixed_window/memory/1000"
  "check:bare_join_keyed setup_windows_keyed.sql check_bare_join.sql check/fixed_window/memory/1000"
)
for line in "${VARIANTS[@]}"; do
  read -r label setup statement name <<<"$line"
  if (($#)); then
    wanted=0
    for pattern in "$@"; do [[ $label == $pattern ]] && wanted=1; done
    ((wanted)) || continue
  fi
  count "$label" "$setup" "$statement" "$name"
done
