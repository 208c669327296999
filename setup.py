"""The wheel's build hook: prebuilt stage libraries for the default build (kcc.model.prebuilt_build).

Everything else is in pyproject.toml. A wheel (not an editable install) gets kcc/prebuilt/<machine>/
for x86_64 and, with the cross compiler installed, aarch64; it is tagged with exactly the machines
whose libraries it carries (linux_x86_64, or linux_aarch64.linux_x86_64): the Python is pure, the
libraries need Linux, glibc and libgomp (GCC's OpenMP runtime).
"""
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


class BuildPyWithPrebuilt(build_py):
    def run(self):
        super().run()
        if not self.editable_mode:
            sys.path.insert(0, str(HERE))        # this source tree's kcc, not an installed one
            from kcc.model.prebuilt_build import build
            build(Path(self.build_lib) / "kcc" / "prebuilt")


class PlatformWheel(bdist_wheel):
    """Tagged by the machines whose libraries it carries (the files stay in purelib: no extension
    module is imported; the libraries are loaded with ctypes)."""

    def get_tag(self):
        if "editable_wheel" in self.distribution.command_obj:   # `pip install -e`: runs from the source tree,
            return "py3", "none", "any"                          # which compiles what it needs
        built = Path(self.get_finalized_command("build_py").build_lib) / "kcc" / "prebuilt"
        machines = sorted(p.parent.name for p in built.glob("*/table.json"))
        if not machines:
            raise SystemExit(f"no prebuilt stage libraries in {built}: the wheel would not speak without a C compiler")
        return "py3", "none", ".".join(f"linux_{m}" for m in machines)


setup(cmdclass={"build_py": BuildPyWithPrebuilt, "bdist_wheel": PlatformWheel})
