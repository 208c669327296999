#!/usr/bin/env bash
# Install kcc and its oracle/test dependencies into ./.venv (idempotent).
# torch is pinned to 2.13.0 (the CPU wheel); kokoro==0.9.4 is installed without its G2P
# dependency tree (misaki[en] pulls spaCy), since kcc imports only its model modules.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
. .venv/bin/activate
pip install -q --disable-pip-version-check "torch==2.13.0"
pip install -q --disable-pip-version-check --no-deps "kokoro==0.9.4"
pip install -q --disable-pip-version-check -e ".[dev]"
python -c "import kcc, torch; print('kcc', kcc.__version__, 'torch', torch.__version__)"
