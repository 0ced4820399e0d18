"""Workshop exercises: checks that run a learner's code on hidden, adversarial cases.

Every ``check_*`` compares with :mod:`mamba2_tutorial.reference` and raises :class:`ExerciseFailed` (an
AssertionError) with the failing case, the error, the first wrong element and a hint. A hint names a cause
only once a check has confirmed it: in the PyTorch exercises the learner's output matches a known mistake, or
a re-run on a changed input comes out right; the cuTile checks diagnose by experiment only, re-running the
kernel on probe inputs that switch one term off, undo one mistake, or make the answer easy to read
(:mod:`._experiments`). Otherwise the hint says where the wrong elements are. The cuTile exercises come in two
tiers, guided (``notebooks/exercises/``) and open (``notebooks/exercises/open/``), with one check each. On
success a check prints what was tested. The cuTile checks launch the kernel through
:func:`mamba2_tutorial.runtime.backends.launch` on the GPU when one is usable, and always on the CPU tile
executor.

Help comes in tiers, after a failed check: :func:`hint` (``hint(1)``) repeats the first hint, ``hint(2)``
prints a step-by-step recipe, and :func:`show_solution` prints the worked answer, only when asked.

    ex01_recurrence_step      check_recurrence_step(ssd_step)
    ex02_segsum               check_segsum(segsum)
    ex03_chunk_state_torch    check_chunk_state(chunk_state)
    ex04_cutile_chunk_cumsum  check_chunk_cumsum_kernel(chunk_cumsum_kernel)
    ex05_cutile_chunk_state   check_chunk_state_kernel(chunk_state_kernel)
    ex06_cutile_state_passing check_state_passing_kernel(state_passing_kernel)
    ex07_cutile_chunk_scan    check_chunk_scan_kernel(chunk_scan_kernel)
    ex08_cutile_state_passing_bwd  check_state_passing_bwd_kernel(state_passing_bwd_kernel)
"""

from ._harness import ExerciseFailed, hint, show_solution
from .chunk_cumsum import check_chunk_cumsum_kernel
from .chunk_scan import check_chunk_scan_kernel
from .chunk_state import check_chunk_state, check_chunk_state_kernel
from .recurrence import check_recurrence_step
from .segsum import check_segsum
from .state_passing import check_state_passing_kernel
from .state_passing_bwd import check_state_passing_bwd_kernel

__all__ = [
    "ExerciseFailed",
    "check_chunk_cumsum_kernel",
    "check_chunk_scan_kernel",
    "check_chunk_state",
    "check_chunk_state_kernel",
    "check_recurrence_step",
    "check_segsum",
    "check_state_passing_bwd_kernel",
    "check_state_passing_kernel",
    "hint",
    "show_solution",
]
