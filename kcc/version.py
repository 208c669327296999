"""kcc's version (pyproject.toml's, checked equal by tests/test_version.py): on the ground
floor, so that any module may name it without importing the package's API table."""
__version__ = "0.2.0"
