#!/usr/bin/env bash
# Bounded coverage-guided fuzzing (atheris/libFuzzer) of the circuit validator, a generated C
# entry point and the checkpoint / voice loaders. SECONDS_EACH (default 30) per target; then
# the loader fuzzer's corpus is replayed (at most SECONDS_EACH) with every generated library
# built -fsanitize=address,undefined and the sanitizer runtimes preloaded, as scripts/sanitize.sh
# runs the tests (preloaded, they take over libFuzzer's coverage hooks, so that pass replays
# what the guided pass found instead of searching). Then the text surface, the files a user
# hands kcc (batch manifests, lexicons, a --voices-dir's contents), and the servers' connections
# and Wyoming events over loopback with the test doubles, and the books `kcc book` reads (with a
# work count that must stay linear). Any finding exits non-zero.
set -uo pipefail
cd "$(dirname "$0")/.."
secs="${SECONDS_EACH:-30}"
log="$(mktemp)"
work="$(mktemp -d)"
trap 'rm -rf "$work" "$log"' EXIT
run_target() {  # target, then extra libFuzzer arguments
  local target="$1"; shift
  PYTHONPATH=. .venv/bin/python "$target" "$@" -rss_limit_mb=4096 -print_final_stats=1 >"$log" 2>&1
  local rc=$?
  grep -E "stat::number_of_executed_units|stat::new_units_added" "$log"
  if [ "$rc" -ne 0 ]; then tail -40 "$log"; echo "finding in $target (exit $rc)"; exit 1; fi
}
for target in fuzz/fuzz_circuit_validator.py fuzz/fuzz_c_entry.py fuzz/fuzz_checkpoint.py; do
  echo "== $target for ${secs}s =="
  corpus="$work/$(basename "$target" .py)"
  mkdir -p "$corpus"
  run_target "$target" "$corpus" -max_total_time="$secs"
done
echo "== fuzz/fuzz_checkpoint.py corpus under ASan + UBSan =="
plain="${KCC_CACHE_DIR:-$HOME/.cache/kcc}"
mkdir -p "$plain-asan" "$plain/checkpoints"
[ -e "$plain-asan/checkpoints" ] || ln -s "$plain/checkpoints" "$plain-asan/checkpoints"
KCC_CACHE_DIR="$plain-asan" KCC_SANITIZE=1 ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 \
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  LD_PRELOAD="$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so)" \
  run_target fuzz/fuzz_checkpoint.py "$work/fuzz_checkpoint" -runs=0 -max_total_time="$secs"
echo "== fuzz/fuzz_text.py (the text surface: kcc.speech.engine.plan at speeds 0.25..4) for ${secs}s =="
PYTHONPATH=. .venv/bin/python fuzz/fuzz_text.py --seconds "$secs" || { echo "finding in fuzz/fuzz_text.py"; exit 1; }
echo "== fuzz/fuzz_clients.py (kcc serve: idle / slow / non-reading / dropping clients, loopback) for ${secs}s =="
PYTHONPATH=. .venv/bin/python fuzz/fuzz_clients.py --self-serve --seconds "$secs" 2>"$log" \
  || { tail -20 "$log"; echo "finding in fuzz/fuzz_clients.py"; exit 1; }
echo "== fuzz/fuzz_wyoming.py (kcc wyoming: random events and declared lengths, loopback) for ${secs}s =="
PYTHONPATH=. .venv/bin/python fuzz/fuzz_wyoming.py --self-serve --seconds "$secs" 2>"$log" \
  || { tail -20 "$log"; echo "finding in fuzz/fuzz_wyoming.py"; exit 1; }
echo "== fuzz/fuzz_inputs.py (manifests, lexicons, voices-dir contents) for ${secs}s each =="
PYTHONPATH=. .venv/bin/python -W ignore fuzz/fuzz_inputs.py --seconds "$secs" -n 10000000 || { echo "finding in fuzz/fuzz_inputs.py"; exit 1; }
echo "== fuzz/fuzz_books.py (kcc book: HTML, XHTML, Markdown, EPUB members, PDF; work linear) for ${secs}s =="
PYTHONPATH=. .venv/bin/python -W ignore fuzz/fuzz_books.py --seconds "$secs" -n 10000000 || { echo "finding in fuzz/fuzz_books.py"; exit 1; }
echo "fuzz: no findings"
