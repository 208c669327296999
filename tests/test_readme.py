"""The README is a user's document whose generated sections match the code and the results."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_generated_sections_are_current_and_the_readme_is_short():
    res = subprocess.run([sys.executable, str(ROOT / "scripts" / "update_readme.py"), "--check"],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.encode()) < 10 * 1024
    setup = [line for line in text.split("```bash", 1)[1].split("```", 1)[0].splitlines()
             if line and not line.startswith("#")]
    assert setup == ['bash scripts/install.sh && .venv/bin/kcc say "Hello from generated C." -o hello.wav',
                     "bash scripts/install.sh --dev && .venv/bin/python -m pytest -q"]
    ci = (ROOT / ".ci" / "run").read_text()
    assert "bash scripts/install.sh --dev" in ci and ".venv/bin/python -m pytest -q" in ci


def test_every_limit_row_names_a_value():
    from kcc.limits import LIMITS
    assert len(LIMITS) >= 10
    for surface, what, value in LIMITS:
        assert surface and what and value and "None" not in value
