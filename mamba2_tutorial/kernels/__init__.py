"""The taught cuTile kernels: the primer's, kernels 1-3 of the SSD forward with the three-launch
``ssd_forward_taught`` (``forward.py``), and the four backward kernels (``bwd_states.py``, ``bwd_chunk.py``)
with ``ssd_backward_taught`` (``backward.py``) and the autograd Function (``autograd.py``). Each module
listed in ``KERNEL_MODULES`` defines
``SPECS: list[KernelSpec]``; ``..fast.specs`` adds the kernels the fast path's shipped configs launch.

Kernel modules import on a machine without a GPU (they only define ``@ct.kernel`` functions and
host wrappers); ``all_kernel_specs()`` collects their specs for ``python -m mamba2_tutorial compile``
and the tests.
"""

from __future__ import annotations

import importlib

from .spec import KernelSpec

__all__ = ["KERNEL_MODULES", "KernelSpec", "all_kernel_specs", "kernel_spec"]

# Modules of mamba2_tutorial.kernels whose SPECS the compile check covers. A listed module that is missing
# or defines no SPECS is an error, never a silent skip.
KERNEL_MODULES: tuple[str, ...] = ("primer", "chunk_state", "state_passing", "chunk_scan", "bwd_states",
                                   "bwd_chunk", "..fast.specs", "..fast.bwd_states", "..fast.bwd_chunk")


def all_kernel_specs(modules: tuple[str, ...] | None = None) -> list[KernelSpec]:
    """The specs of every module in ``KERNEL_MODULES`` (or ``modules``), in order; names are unique."""
    specs: list[KernelSpec] = []
    for module_name in KERNEL_MODULES if modules is None else modules:
        module = importlib.import_module(f"{__name__}.{module_name}" if not module_name.startswith("..")
                                         else f"mamba2_tutorial.{module_name[2:]}")
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


def kernel_spec(name: str) -> KernelSpec:
    """The spec called ``name``; KeyError listing the known names otherwise."""
    specs = {s.name: s for s in all_kernel_specs()}
    try:
        return specs[name]
    except KeyError:
        raise KeyError(f"no kernel spec {name!r}; known: {', '.join(specs)}") from None
