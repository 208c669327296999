#!/usr/bin/env bash
# Run the parity suites with every generated library built -fsanitize=address,undefined
# (KCC_SANITIZE=1) and the sanitizer runtimes preloaded into Python. Any finding aborts the run.
# The suites are the tests marked `sanitize` (pytestmark = pytest.mark.sanitize in the file):
# a new parity test file joins the run by carrying the mark, not by an edit here.
set -euo pipefail
cd "$(dirname "$0")/.."
export KCC_SANITIZE=1 ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
plain="${KCC_CACHE_DIR:-$HOME/.cache/kcc}"
export KCC_CACHE_DIR="$plain-asan"
mkdir -p "$KCC_CACHE_DIR" "$plain/checkpoints"
# Seeded checkpoints do not depend on the build flags: share them with the plain cache.
[ -L "$KCC_CACHE_DIR/checkpoints" ] || [ -d "$KCC_CACHE_DIR/checkpoints" ] || ln -s "$plain/checkpoints" "$KCC_CACHE_DIR/checkpoints"
LD_PRELOAD="$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so)" \
  .venv/bin/python -m pytest -q -p no:cacheprovider -m sanitize tests "$@"
