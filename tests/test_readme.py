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


def test_the_speed_table_names_each_cpu_it_shows():
    """One table, a column per CPU measured: each named by its core (cloud guests report only
    'AMD EPYC'), family and model, and whether it has AVX-512."""
    sys.path.insert(0, str(ROOT))
    from bench.bench_synth import amd_core, cpu_core
    amd = {"cpu": "AMD EPYC"}
    assert amd_core({**amd, "cpu_family": "25", "cpu_model": "1"}) == "Zen 3"
    assert amd_core({"cpu": "Intel(R) Xeon(R)", "cpu_family": "6", "cpu_model": "143"}) is None   # labelled by name
    assert cpu_core({**amd, "cpu_family": "25", "cpu_model": "1"}) == " (Zen 3, family 25 model 1)"
    assert cpu_core({**amd, "cpu_family": "25", "cpu_model": "17"}) == " (Zen 4, family 25 model 17)"
    assert cpu_core({**amd, "cpu_family": "26", "cpu_model": "2"}) == " (Zen 5, family 26 model 2)"
    assert cpu_core({"cpu": "Intel(R) Xeon(R)", "cpu_family": "6", "cpu_model": "143"}) == " (family 6 model 143)"
    assert cpu_core(amd) == ""                   # a result recorded before the fields existed
    speed = (ROOT / "README.md").read_text(encoding="utf-8").split("## Speed", 1)[1].split("<!--", 1)[0]
    header = next(line for line in speed.splitlines() if line.startswith("| engine |"))
    for core, isa in (("Zen 4", "AVX-512"), ("Zen 3", "AVX2 + FMA, no AVX-512")):
        assert f"**{core}**: AMD EPYC family 25" in speed and isa in speed
        assert f"{core}, 16 ids" in header
