"""One version: pyproject.toml's is the one kcc reports (kcc.version, read by the artifact key,
batch sidecars and book tags)."""
import tomllib
from pathlib import Path

import kcc
from kcc.version import __version__


def test_the_package_reports_pyprojects_version():
    meta = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
    assert __version__ == meta["project"]["version"] == kcc.__version__
