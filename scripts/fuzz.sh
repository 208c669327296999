#!/usr/bin/env bash
# Bounded coverage-guided fuzzing (atheris/libFuzzer) of the circuit validator and a generated
# C entry point. SECONDS_EACH (default 30) per target; any finding exits non-zero.
set -uo pipefail
cd "$(dirname "$0")/.."
secs="${SECONDS_EACH:-30}"
log="$(mktemp)"
for target in fuzz/fuzz_circuit_validator.py fuzz/fuzz_c_entry.py; do
  echo "== $target for ${secs}s =="
  PYTHONPATH=. .venv/bin/python "$target" -max_total_time="$secs" -rss_limit_mb=4096 -print_final_stats=1 >"$log" 2>&1
  rc=$?
  grep -E "stat::number_of_executed_units|stat::new_units_added" "$log"
  if [ "$rc" -ne 0 ]; then tail -40 "$log"; echo "finding in $target (exit $rc)"; exit 1; fi
done
echo "fuzz: no findings"
