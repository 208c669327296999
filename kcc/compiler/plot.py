"""`kcc xray --plot`: one PNG of the X-Ray error per checkpoint against the FP32 gate."""
from __future__ import annotations

from pathlib import Path


def plot_results(results, path: str | Path, title: str) -> Path:
    """results: CheckpointResult rows (kcc.compiler.xray), in circuit order."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = [r.name.replace("kokoro.", "") for r in results]
    errs = [max(r.max_abs, 1e-12) for r in results]
    colors = ["#2a9d8f" if r.status == "PASS" else "#e63946" for r in results]
    fig, ax = plt.subplots(figsize=(9, 0.22 * len(results) + 1.6))
    ax.barh(range(len(results)), errs, color=colors)
    ax.set_xscale("log")
    ax.axvline(2e-5, color="black", linestyle="--", linewidth=1)
    ax.text(2e-5, -0.9, " FP32 gate 2e-5", fontsize=7, va="bottom")
    ax.set_yticks(range(len(results)), names, fontsize=6)
    ax.invert_yaxis()
    ax.set_xlabel("max |C - PyTorch| (log)  —  green PASS, red FAIL (own gate may apply)")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
