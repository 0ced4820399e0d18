"""``KernelSpec``: one kernel plus example launch arguments, for compile checks and tests.

Every kernel module in ``mamba2_tutorial.kernels`` lists its kernels in ``SPECS: list[KernelSpec]``.
``python -m mamba2_tutorial compile`` compiles each spec ahead of time for several GPU architectures
(``mamba2_tutorial.compile``); the signature comes from the example arguments, exactly as ``ct.launch`` would
derive it (``mamba2_tutorial.signature``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["KernelSpec"]


@dataclass(frozen=True)
class KernelSpec:
    """A kernel and a way to make example launch arguments.

    name: unique, e.g. ``"primer.matmul_bf16"``.
    kernel: the ``@ct.kernel`` function.
    make_args: ``() -> (grid, args)``; ``grid`` a tuple of up to 3 ints, ``args`` the launch arguments as
        ``ct.launch`` takes them (CPU torch tensors, Python ints/floats, plain values for ``ct.Constant``).
        Called lazily, so building a spec list allocates nothing.
    """

    name: str
    kernel: Any
    make_args: Callable[[], tuple[tuple[int, ...], tuple[Any, ...]]]

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"KernelSpec.name must be a non-empty string, got {self.name!r}")
        if not callable(self.make_args):
            raise TypeError(f"KernelSpec {self.name}: make_args must be callable, got {self.make_args!r}")
        if not hasattr(self.kernel, "_annotated_function"):
            raise TypeError(
                f"KernelSpec {self.name}: kernel must be a @ct.kernel function, got {self.kernel!r}"
            )
