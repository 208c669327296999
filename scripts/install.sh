#!/usr/bin/env bash
# Install kcc into ./.venv (idempotent).
#   bash scripts/install.sh         the runtime: numpy, the G2P, onnx, PyAV, the server (no torch)
#   bash scripts/install.sh --dev   + the oracle (torch 2.13.0 CPU, kokoro 0.9.4) and the test tools
# kokoro==0.9.4 is installed without its G2P dependency tree (misaki[en] pulls spaCy), since the
# oracle imports only its model modules.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
PIP=(.venv/bin/pip install -q --disable-pip-version-check)
if [ "${1:-}" = "--dev" ]; then
  "${PIP[@]}" "torch==2.13.0"
  "${PIP[@]}" --no-deps "kokoro==0.9.4"
  "${PIP[@]}" -e ".[dev]"
  .venv/bin/python -c "import kcc, torch; print('kcc', kcc.__version__, 'torch', torch.__version__, '(dev)')"
else
  "${PIP[@]}" -e .
  .venv/bin/python -c "import kcc; print('kcc', kcc.__version__, '(runtime)')"
fi
# The 54 official voices come from the npm package kokoro-js (kcc.weights.official_voices): get the
# npm client where apt can, then fetch them now. Without npm kcc still speaks, with its 5 Japanese
# voices, and says so.
if ! command -v npm >/dev/null && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
  echo "install.sh: installing the npm client with apt-get (it fetches the official voices)" >&2
  { apt-get install -y -q npm || { apt-get update -q && apt-get install -y -q npm; } \
    || apt-get install -y -q nodejs; } >/dev/null 2>&1 || true   # a nodejs that bundles npm (NodeSource)
fi
.venv/bin/python -m kcc.cli voices --fetch >/dev/null || echo "install.sh: the official voices are not fetched; kcc falls back to its 5 Japanese voices" >&2
