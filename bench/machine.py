"""The machine and the code a figure was measured on, named one way by every bench script (and
by scripts/wheel_check.py, whose table is a bench result too): the CPU's model name, where a
label wants them its widest vector ISA and the cores visible, and the checkout's commit."""
from __future__ import annotations

import os
import platform
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def cpuinfo(key: str) -> str:
    """The first value of `key` in /proc/cpuinfo ("" where it has none, or there is no /proc).
    The key matches whole: "model" is not "model name"."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return ""
    return next((ln.split(":", 1)[1].strip() for ln in lines if ln.split(":")[0].strip() == key), "")


def cpu_name() -> str:
    """The CPU's model name: /proc/cpuinfo's; else lscpu's (an arm64 kernel names no model, lscpu
    decodes the part number); else what Python knows of the machine."""
    name = cpuinfo("model name")
    if not name and shutil.which("lscpu"):
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        name = next((ln.split(":", 1)[1].strip() for ln in out.splitlines() if ln.startswith("Model name:")), "")
    return name or platform.processor() or platform.machine()


def cpu_label() -> str:
    """cpu_name() with the widest x86 vector ISA and the cores visible, e.g. "Intel(R) Xeon(R)
    Platinum 8480+ (AVX-512, 2 cores)"; a CPU with no x86 flags names its architecture instead."""
    flags = cpuinfo("flags").split()
    isa = ("AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "SSE2") if flags else platform.machine()
    return f"{cpu_name()} ({isa}, {os.cpu_count()} cores)"


def short_commit() -> str:
    """The checkout's short commit hash ("" where it is no git checkout)."""
    return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
