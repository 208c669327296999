"""Semantic ops, one module per family; importing this package fills OPS and the kernel registry."""
from kcc.ops.core import OPS, BindContext, LoweringError, OpDef, c_float, define_op, expect  # noqa: F401
from kcc.ops import embedding  # noqa: F401,E402
from kcc.ops import dense, norm  # noqa: F401,E402
from kcc.ops import elementwise, conv, adain, fused, dft_conv  # noqa: F401,E402
from kcc.ops import attention  # noqa: F401,E402
from kcc.ops import recurrence, style, duration  # noqa: F401,E402
from kcc.ops import signal  # noqa: F401,E402
