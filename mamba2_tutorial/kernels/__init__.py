"""The taught cuTile kernels: the primer's, kernels 1-3 of the SSD forward with the three-launch
``ssd_forward_taught`` (``forward.py``), and the four backward kernels (``bwd_states.py``, ``bwd_chunk.py``)
with ``ssd_backward_taught`` (``backward.py``).

Each module listed in ``KERNEL_MODULES`` defines ``SPECS: list[KernelSpec]``; importing this package
registers them with the runtime (:func:`mamba2_tutorial.runtime.specs.register_spec_modules`), for
``python -m mamba2_tutorial compile`` and the tests. Kernel modules import on a machine without a GPU (they
only define ``@ct.kernel`` functions and host wrappers).
"""

from __future__ import annotations

from ..runtime.specs import register_spec_modules

__all__ = ["KERNEL_MODULES"]

#: modules of this package whose SPECS the compile check covers
KERNEL_MODULES: tuple[str, ...] = ("primer", "chunk_state", "state_passing", "chunk_scan", "bwd_states",
                                   "bwd_chunk")

register_spec_modules(*(f"{__name__}.{module}" for module in KERNEL_MODULES))
