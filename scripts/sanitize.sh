#!/usr/bin/env bash
# Run the parity suites with every generated library built -fsanitize=address,undefined
# (KCC_SANITIZE=1) and the sanitizer runtimes preloaded into Python. Any finding aborts the run.
set -euo pipefail
cd "$(dirname "$0")/.."
export KCC_SANITIZE=1 ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
plain="${KCC_CACHE_DIR:-$HOME/.cache/kcc}"
export KCC_CACHE_DIR="$plain-asan"
mkdir -p "$KCC_CACHE_DIR" "$plain/checkpoints"
# Seeded checkpoints do not depend on the build flags: share them with the plain cache.
[ -L "$KCC_CACHE_DIR/checkpoints" ] || [ -d "$KCC_CACHE_DIR/checkpoints" ] || ln -s "$plain/checkpoints" "$KCC_CACHE_DIR/checkpoints"
LD_PRELOAD="$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so)" \
  .venv/bin/python -m pytest -q -p no:cacheprovider \
  tests/test_embedding_boundary.py tests/test_phoneme_encoder.py tests/test_text_encoder.py \
  tests/test_duration.py tests/test_prosody.py tests/test_decoder.py tests/test_conv_ops.py \
  tests/test_signal_ops.py tests/test_lstm.py tests/test_reliability.py tests/test_dft_conv.py \
  tests/test_generator.py tests/test_attention.py "$@"
