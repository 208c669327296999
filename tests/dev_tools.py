"""The system tools a test runs (scripts/dev_packages.txt, the one table): `@pytest.mark.tools(
"make")` on a test, or as a module's pytestmark. A missing tool skips the test, naming the apt
package; but in a venv that `scripts/install.sh --dev` set up (it installs them all and leaves
DEV_STAMP in the venv) a missing tool FAILS the test, so a dev machine never passes by skipping
the browser, aarch64 or export tests. tests/conftest.py applies the mark."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

TABLE = Path(__file__).resolve().parent.parent / "scripts" / "dev_packages.txt"
DEV_STAMP = Path(sys.prefix) / "kcc-dev-tools"


def packages() -> dict[str, str]:
    """command -> the Debian package that provides it."""
    out = {}
    for line in TABLE.read_text(encoding="utf-8").splitlines():
        fields = line.split("#", 1)[0].split()
        if len(fields) >= 2 and fields[1] != "-":
            out[fields[1]] = fields[0]
    return out


def require(*commands: str) -> None:
    """Skip (or, after install.sh --dev, fail) unless every command is on PATH."""
    table = packages()
    unknown = [c for c in commands if c not in table]
    if unknown:
        raise KeyError(f"{unknown}: not in {TABLE}")
    gone = [c for c in commands if shutil.which(c) is None]
    if not gone:
        return
    why = f"{', '.join(gone)} not installed: apt-get install {' '.join(sorted({table[c] for c in gone}))}"
    if DEV_STAMP.exists():
        pytest.fail(f"{why} (this venv was set up by scripts/install.sh --dev, which installs them: rerun it)")
    pytest.skip(f"{why} (or bash scripts/install.sh --dev)")
