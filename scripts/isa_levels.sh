#!/usr/bin/env bash
# Run the key parity suites once per x86-64 dispatch level this CPU can execute (KCC_ISA forces
# every portable build to one level: kcc/compiler/isa.py), so the AVX-512, AVX2 + FMA, AVX2 and baseline
# paths of the portable build are all tested on one machine. Then tests/test_isa_levels.py checks
# the levels against each other (bit identity where the multiply-add is the same) and the gate.
# Off x86-64 there is no dispatch to force: it says so and exits 0. Extra args go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
levels=$("$PY" -c 'from kcc.compiler.isa import runnable_levels; print(" ".join(runnable_levels()))')
if [ -z "$levels" ]; then
  echo "isa_levels: $(uname -m) has no x86-64 dispatch levels; nothing to force"
  exit 0
fi
# The GEMM tiles and their fused twins, attention, the block-DFT and Winograd convs, AdaIN/Snake rows, the
# LSTM step, the generator and the whole model from phoneme ids.
SUITES=(tests/test_ops.py tests/test_conv_variants.py tests/test_phoneme_encoder.py tests/test_attention.py tests/test_dft_conv.py tests/test_winograd_conv.py tests/test_lstm.py
        tests/test_generator.py tests/test_full_model.py)
for level in $levels; do
  echo "== KCC_ISA=$level"
  KCC_ISA=$level "$PY" -m pytest -q -p no:cacheprovider "${SUITES[@]}" "$@"
done
echo "== levels against each other"
"$PY" -m pytest -q -p no:cacheprovider tests/test_isa_levels.py "$@"
