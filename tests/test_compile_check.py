"""The ahead-of-time compile check that `make test` runs: every cuTile kernel compiles with the real tileiras,
no GPU needed.

For sm_90 (Hopper, the architecture the shipped configs are tuned for) every kernel spec of the package; for
sm_80, sm_100 and sm_120 one spec of each kernel function (`compile.quick_plan`): every ``@ct.kernel`` is
compiled for every architecture, and every dtype, tile size and hint for one. `make compile` (`python -m
mamba2_tutorial compile`) is the whole matrix, printed as a table. The cubins go to cuTile's disk cache, where
the tests that compile the same specs find them; a kernel whose source changed has new bytecode and is
compiled again. One test per architecture (sm_90's in two halves, the taught kernels and the fast path's), so
that pytest-xdist spreads them over the cores beside the other tests.
"""

from __future__ import annotations

import pytest

from mamba2_tutorial.runtime.compile import (
    DEFAULT_ARCHS,
    PRIMARY_ARCH,
    compile_specs,
    format_table,
    quick_plan,
)

PARTS = [(arch, part) for arch in DEFAULT_ARCHS
         for part in (("taught", "fast") if arch == PRIMARY_ARCH else ("all",))]


def _part(spec, part: str) -> bool:
    fast = spec.kernel._annotated_function.pyfunc.__module__.startswith("mamba2_tutorial.fast")
    return part == "all" or fast == (part == "fast")


@pytest.mark.slow
@pytest.mark.parametrize(("arch", "part"), PARTS)
def test_every_kernel_compiles(arch, part):
    from mamba2_tutorial import all_kernel_specs

    pairs = [(spec, a) for spec, a in quick_plan(all_kernel_specs()) if a == arch and _part(spec, part)]
    assert pairs
    results = compile_specs(pairs, None, jobs=1, cache=True)
    print(format_table(results))
    failed = [f"{r.name} [{r.arch}]:\n{r.error}" for r in results if not r.ok]
    assert not failed, "\n\n".join(failed)
    assert [r.name for r in results] == [spec.name for spec, _ in pairs]
    assert all(r.cubin_bytes > 0 for r in results)


def test_the_parts_cover_the_quick_plan_once():
    from mamba2_tutorial import all_kernel_specs

    plan = [(spec.name, arch) for spec, arch in quick_plan(all_kernel_specs())]
    covered = [(spec.name, arch) for arch, part in PARTS for spec, a in quick_plan(all_kernel_specs())
               if a == arch and _part(spec, part)]
    assert sorted(covered) == sorted(plan)
