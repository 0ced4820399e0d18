"""The runtime: what the taught kernels (:mod:`mamba2_tutorial.kernels`) and the fast path
(:mod:`mamba2_tutorial.fast`) both stand on. It imports neither; each path hands it what is its own (its
kernel modules, its autograd stages and backward).

==================  ======================================================================================
``platforms.py``    where cuTile runs, and what a learner does where it does not (``CuTileUnavailable``)
``backends.py``     the backend choice: the GPU or the CPU tile executor (``select_backend``)
``launch.py``       every launch: ``resolve_backend``, the compiler hint (``hinted``), ``launch``, and the
                    launch recorder (``recording``); the float64 tier
``validation.py``   argument checks with errors in the math's names (``validate_kernel_inputs``)
``signature.py``    a kernel's signature from example arguments, as ``ct.launch`` derives it, without a GPU
``specs.py``        ``KernelSpec`` and the registry of kernel modules the compile check covers
``autograd.py``     the ``torch.autograd.Function``: a forward's stages and its backward, both passed in
``compile.py``      ahead-of-time compiles with tileiras (``python -m mamba2_tutorial compile``), Tile IR
``cubin_info.py``   registers and stack per cubin
``hardware.py``     the GPUs as numbers (SMs, shared memory, registers) and an occupancy calculator
==================  ======================================================================================
"""
