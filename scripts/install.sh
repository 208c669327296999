#!/usr/bin/env bash
# Install kcc into ./.venv (idempotent).
#   bash scripts/install.sh         the runtime: numpy, the G2P, onnx, PyAV, the server (no torch)
#   bash scripts/install.sh --lang ja,zh   the runtime + the Japanese / Mandarin G2P extras (kcc[ja,zh])
#   bash scripts/install.sh --dev   + every language, the oracle (torch 2.13.0 CPU, kokoro 0.9.4) and the test tools
# kokoro==0.9.4 is installed without its G2P dependency tree (misaki[en] pulls spaCy), since the
# oracle imports only its model modules.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

# --dev: the system tools the suite runs (scripts/dev_packages.txt, the one table), installed with
# apt-get where this is root or has sudo; otherwise the missing ones are named and install stops,
# so that no test skips for want of a tool. The venv then gets the stamp that makes such a test
# fail instead (tests/dev_tools.py).
dev_system_packages() {
  local table=scripts/dev_packages.txt pkgs=() cmds=() gone=() p c
  while read -r p c _; do pkgs+=("$p"); [ "$c" = "-" ] || cmds+=("$c"); done < <(sed 's/#.*//' "$table" | awk 'NF')
  for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || gone+=("$p")
  done
  if [ "${#gone[@]}" -gt 0 ]; then
    local sudo=()
    [ "$(id -u)" -eq 0 ] || sudo=(sudo -n)
    if command -v apt-get >/dev/null && { [ "${#sudo[@]}" -eq 0 ] || sudo -n true 2>/dev/null; }; then
      echo "installing system packages: ${gone[*]}"
      DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get update -qq >/dev/null
      DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${gone[@]}" >/dev/null
    else
      echo "install.sh --dev: missing system packages (the suite runs them): ${gone[*]}" >&2
      echo "  as root: apt-get install ${gone[*]}   (then rerun bash scripts/install.sh --dev)" >&2
      exit 1
    fi
  fi
  for c in "${cmds[@]}"; do
    command -v "$c" >/dev/null || { echo "install.sh --dev: '$c' is still not on PATH (from $table)" >&2; exit 1; }
  done
}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
PIP=(.venv/bin/pip install -q --disable-pip-version-check)
if [ "${1:-}" = "--dev" ]; then
  dev_system_packages
  "${PIP[@]}" "torch==2.13.0"
  "${PIP[@]}" --no-deps "kokoro==0.9.4"
  "${PIP[@]}" -e ".[dev]"
  .venv/bin/python -c "import kcc, torch; print('kcc', kcc.__version__, 'torch', torch.__version__, '(dev)')"
  echo "system tools from scripts/dev_packages.txt installed by scripts/install.sh --dev" > .venv/kcc-dev-tools
elif [ "${1:-}" = "--lang" ]; then
  langs=${2:?--lang needs a list, e.g. --lang ja,zh}
  [[ "$langs" =~ ^(ja|zh)(,(ja|zh))*$ ]] || { echo "install.sh: --lang takes ja and/or zh (the others need no extra)" >&2; exit 2; }
  "${PIP[@]}" -e ".[$langs]"
  .venv/bin/python -c "import kcc; print('kcc', kcc.__version__, '(runtime + $langs)')"
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
