"""cuTile's own launch-time signature derivation, run on a machine without a GPU.

``ct.launch`` derives a kernel's signature (what it specializes on: dtypes, unit strides, divisibility of
strides and shapes, base alignment, aliasing) in its C extension, which needs the CUDA driver.
:mod:`mamba2_tutorial.runtime.signature` re-derives it in Python so that the CPU executor and the
ahead-of-time compiles can run without one. This module runs the real derivation on the CPU, so that the two
can be compared (``tests/test_signature_parity.py``):

- :func:`install_stand_in_driver` puts a stand-in for ``libcuda.so.1`` in front of cuTile: every driver
  function it asks for succeeds and does nothing (cuTile 1.7 only asks the driver for its version and for
  the context of an array's pointer while deriving a signature);
- :func:`launch_signature` is ``KernelSignature.from_kernel_args`` on CPU tensors presented as CUDA ones
  (:func:`as_cuda_array`: the same pointer, shape and strides through DLPack).

It leans on two private details of cuda-tile 1.7, pinned like the executor's hooks: the module
``cuda.tile._load_libcuda`` and its ``cuGetProcAddress_v2_ptrptr``. Use it only in a process that launches
nothing (a test's subprocess, a compile script): after :func:`install_stand_in_driver`, a real launch in the
same process would reach the stand-in.
"""

from __future__ import annotations

import ctypes
import sys
import types
from collections.abc import Sequence
from typing import Any

__all__ = ["as_cuda_array", "install_stand_in_driver", "launch_signature"]

_DRIVER_MODULE = "cuda.tile._load_libcuda"
_CUDA_SUCCESS = 0
_KDL_CUDA = 2  # DLPack's device type for CUDA memory
_DRIVER_VERSION = 13000  # what cuDriverGetVersion reports: CUDA 13.0
_FAKE_CONTEXT = 0x1000

_keep_alive: list = []  # the ctypes callbacks must outlive every call cuTile makes through them


def _stand_in(name: str) -> int:
    """Address of a C-callable stand-in for the driver function ``name``."""
    if name == "cuDriverGetVersion":
        def driver_version(out):
            out[0] = _DRIVER_VERSION
            return _CUDA_SUCCESS

        fn = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_int))(driver_version)
    elif name == "cuPointerGetAttribute":
        def pointer_attribute(out, _attribute, _pointer):
            out[0] = _FAKE_CONTEXT
            return _CUDA_SUCCESS

        fn = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int,
                              ctypes.c_uint64)(pointer_attribute)
    else:  # cuInit and anything else: succeed, touch nothing (the C caller ignores the argument count)
        fn = ctypes.CFUNCTYPE(ctypes.c_int)(lambda: _CUDA_SUCCESS)
    _keep_alive.append(fn)
    return ctypes.cast(fn, ctypes.c_void_p).value


def install_stand_in_driver() -> None:
    """Make cuTile load the stand-in driver instead of ``libcuda.so.1``. Idempotent; RuntimeError if cuTile
    has already loaded a real driver in this process."""
    loaded = sys.modules.get(_DRIVER_MODULE)
    if loaded is not None:
        if getattr(loaded, "_mamba2_stand_in", False):
            return
        raise RuntimeError(
            "cuTile has already loaded the CUDA driver in this process; install the stand-in driver in a "
            "fresh process, before the first launch or signature"
        )

    proto = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int,
                             ctypes.c_uint64, ctypes.c_void_p)

    def get_proc_address(symbol, pfn, _cuda_version, _flags, status):
        pfn[0] = _stand_in(symbol.decode())
        if status:
            ctypes.c_int.from_address(status).value = 0  # CU_GET_PROC_ADDRESS_SUCCESS
        return _CUDA_SUCCESS

    entry = proto(get_proc_address)
    module = types.ModuleType(_DRIVER_MODULE, "stand-in CUDA driver (tests/driverless.py)")
    module._entry = entry
    module._mamba2_stand_in = True
    module.cuGetProcAddress_v2_ptrptr = ctypes.addressof(entry)
    sys.modules[_DRIVER_MODULE] = module


class _CudaArray:
    """A CPU tensor seen through DLPack as a CUDA array on device 0: same pointer, shape and strides."""

    def __init__(self, tensor):
        self.tensor = tensor

    def __dlpack__(self, stream=None, **_kwargs):
        import torch.utils.dlpack

        capsule = torch.utils.dlpack.to_dlpack(self.tensor)
        get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
        get_pointer.restype = ctypes.c_void_p
        get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
        managed = get_pointer(capsule, b"dltensor")
        # DLManagedTensor starts with DLTensor {void* data; DLDevice {int32 device_type; int32 id}; ...}
        ctypes.c_int32.from_address(managed + ctypes.sizeof(ctypes.c_void_p)).value = _KDL_CUDA
        return capsule

    def __dlpack_device__(self):
        return (_KDL_CUDA, 0)


def as_cuda_array(value: Any) -> Any:
    """``value`` with every CPU torch tensor in it (also in lists and tuples) presented as a CUDA array."""
    import torch

    if isinstance(value, torch.Tensor):
        if value.device.type != "cpu":
            raise ValueError(f"as_cuda_array takes CPU tensors, got one on {value.device}")
        return _CudaArray(value)
    if isinstance(value, list):
        return [as_cuda_array(v) for v in value]
    if isinstance(value, tuple):
        return tuple(as_cuda_array(v) for v in value)
    return value


def launch_signature(kernel, args: Sequence[Any]):
    """The signature ``ct.launch(stream, grid, kernel, args)`` would compile, derived by cuTile's own C code
    from CPU tensors (the stand-in driver is installed first). Same result type as
    :func:`mamba2_tutorial.runtime.signature.kernel_signature`, with the mangled symbol filled in."""
    from cuda.tile.compilation import CallingConvention, KernelSignature

    install_stand_in_driver()
    return KernelSignature.from_kernel_args(kernel, as_cuda_array(tuple(args)),
                                            CallingConvention.cutile_python_v2())
