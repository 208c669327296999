"""The compute precisions a model can be built in, and the `--precision` option that names them:
light on purpose (no compiler import), so that `kcc --help` and every subcommand's --help list
them without loading the compiler (kcc.compiler.precision checks and applies them)."""
from __future__ import annotations

PRECISIONS = ("fp32", "bf16", "int8")


def add_precision_argument(parser) -> None:
    """`--precision fp32|bf16|int8` for kcc say / synth / serve / batch (kcc/cli.py)."""
    parser.add_argument("--precision", choices=PRECISIONS, default=None,
                        help="compute precision: fp32 (default; KCC_PRECISION), bf16 (faster on CPUs with "
                             "AVX512_BF16, fp32 elsewhere; passes the listening gate), int8 (int8 convs: a "
                             "sixth of fp32's weight bytes; faster with AVX512_VNNI / AVX-VNNI, about half its speed "
                             "on plain AVX2, fp32 below AVX2)")
