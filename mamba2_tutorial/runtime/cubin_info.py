"""What a compiled kernel costs the SM, read from its cubin: registers per thread and the stack frame.

tileiras writes these into the cubin's ``.nv.info`` ELF section as EIATTR records (what
``cuobjdump -res-usage`` prints as REG and STACK), so they can be checked on a machine without a GPU and
without the CUDA binary utilities. Occupancy follows from them: a 256-thread block of 128 registers per thread
fills half of an SM's 65 536 registers, and a non-zero frame means spills to local memory
(``docs/perf-history.md`` tells what spills cost the state stage).
"""

from __future__ import annotations

import struct

__all__ = ["cubin_resources"]

# EIATTR codes (the CUDA ELF's .nv.info attributes) and formats
_REGCOUNT, _FRAME_SIZE, _MIN_STACK_SIZE = 0x2F, 0x11, 0x12
_EIFMT_NVAL, _EIFMT_BVAL, _EIFMT_HVAL, _EIFMT_SVAL = 1, 2, 3, 4


def _sections(cubin: bytes) -> dict[str, bytes]:
    if cubin[:4] != b"\x7fELF" or cubin[4] != 2:
        raise ValueError("cubin_resources: not a 64-bit ELF cubin")
    shoff = struct.unpack_from("<Q", cubin, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * shentsize) for i in range(shnum)]
    names_at = headers[shstrndx][4]

    def name(off: int) -> str:
        end = cubin.index(b"\0", names_at + off)
        return cubin[names_at + off:end].decode()

    return {name(h[0]): cubin[h[4]:h[4] + h[5]] for h in headers}


def cubin_resources(cubin: bytes) -> dict[str, int]:
    """``{"registers", "frame_bytes", "min_stack_bytes"}`` of the (first) kernel in ``cubin``, from the
    EIATTR_REGCOUNT, EIATTR_FRAME_SIZE and EIATTR_MIN_STACK_SIZE records of its ``.nv.info`` section."""
    info = _sections(cubin).get(".nv.info")
    if info is None:
        raise ValueError("cubin_resources: the cubin has no .nv.info section")
    found: dict[str, int] = {}
    keys = {_REGCOUNT: "registers", _FRAME_SIZE: "frame_bytes", _MIN_STACK_SIZE: "min_stack_bytes"}
    i = 0
    while i + 2 <= len(info):
        fmt, attr = info[i], info[i + 1]
        if fmt == _EIFMT_SVAL:  # u16 size, then (u32 symbol, u32 value) for these attributes
            size = struct.unpack_from("<H", info, i + 2)[0]
            if attr in keys and size >= 8:
                found.setdefault(keys[attr], struct.unpack_from("<I", info, i + 8)[0])
            i += 4 + size
        elif fmt in (_EIFMT_HVAL, _EIFMT_BVAL):
            i += 4
        elif fmt == _EIFMT_NVAL:
            i += 2
        else:
            raise ValueError(f"cubin_resources: unknown .nv.info record format {fmt} at byte {i}")
    missing = set(keys.values()) - set(found)
    if missing:
        raise ValueError(f"cubin_resources: no {sorted(missing)} record in .nv.info")
    return found
