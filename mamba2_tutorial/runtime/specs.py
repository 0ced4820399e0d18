"""``KernelSpec``: one kernel plus example launch arguments, for compile checks and tests; and the registry
of the modules that define them.

A kernel module lists its kernels in ``SPECS: list[KernelSpec]``, and its package registers the module here
(:func:`register_spec_modules`: ``mamba2_tutorial.kernels`` its taught kernels, ``mamba2_tutorial.fast`` the
kernels its shipped configs launch). :func:`all_kernel_specs` collects the specs of every registered module.
``python -m mamba2_tutorial compile`` compiles each spec ahead of time for several GPU architectures
(``mamba2_tutorial.runtime.compile``); the signature comes from the example arguments, exactly as
``ct.launch`` would derive it (``mamba2_tutorial.runtime.signature``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["KernelSpec", "all_kernel_specs", "kernel_spec", "register_spec_modules", "spec_modules"]


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


#: the registered kernel modules (full names), in registration order
_MODULES: list[str] = []


def register_spec_modules(*modules: str) -> None:
    """Register kernel modules whose ``SPECS`` the compile check covers, by full name (e.g.
    ``"mamba2_tutorial.kernels.primer"``). Each is imported when the specs are first asked for, so that
    registering costs nothing. Registering a module twice keeps it once."""
    for module in modules:
        if not isinstance(module, str) or not module or module.startswith("."):
            raise ValueError("register_spec_modules: a module's full name, e.g. "
                             f"'mamba2_tutorial.kernels.primer', got {module!r}")
        if module not in _MODULES:
            _MODULES.append(module)


def spec_modules() -> tuple[str, ...]:
    """The registered kernel modules, in registration order."""
    return tuple(_MODULES)


def all_kernel_specs(modules: Sequence[str] | None = None) -> list[KernelSpec]:
    """The specs of every registered module (or of ``modules``, full names), in order; names are unique. A
    module that is missing or defines no SPECS is an error, never a silent skip."""
    specs: list[KernelSpec] = []
    for module_name in spec_modules() if modules is None else modules:
        module = importlib.import_module(module_name)
        module_specs = getattr(module, "SPECS", None)
        if not module_specs:
            raise RuntimeError(f"kernel module {module.__name__} must define a non-empty SPECS list")
        for spec in module_specs:
            if not isinstance(spec, KernelSpec):
                raise TypeError(f"{module.__name__}.SPECS holds {spec!r}, not a KernelSpec")
        specs.extend(module_specs)
    seen: set[str] = set()
    for spec in specs:
        if spec.name in seen:
            raise ValueError(f"duplicate kernel spec name {spec.name!r}")
        seen.add(spec.name)
    return specs


def kernel_spec(name: str, modules: Sequence[str] | None = None) -> KernelSpec:
    """The spec called ``name``; KeyError listing the known names otherwise."""
    specs = {s.name: s for s in all_kernel_specs(modules)}
    try:
        return specs[name]
    except KeyError:
        raise KeyError(f"no kernel spec {name!r}; known: {', '.join(specs)}") from None
