"""CPU implementations of cuTile operations, one module per family; importing this package registers them."""

from . import elementwise, matmul, memory, misc, reduce, shape  # noqa: F401
