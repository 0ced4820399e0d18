"""cuTile's own API examples, run on the CPU executor.

The docstrings of ``cuda/tile/_stub.py`` hold ``.. testcode::`` / ``.. testoutput::`` pairs that NVIDIA runs
on a GPU. Each is run here unchanged (``device='cuda:0'`` dropped, ``ct.launch`` routed to the CPU executor)
and its printed output compared with the documented one. Examples that need what the executor does not emulate
(block-scaled fp8 ``mma_scaled``, raw pointers, advanced indexing, byte packing) are skipped with the reason.
"""

from __future__ import annotations

import re
import runpy
import textwrap

import cuda.tile as ct
import cuda.tile._stub as stub_module
import pytest

from mamba2_tutorial.executor import run_kernel

_BLOCK = re.compile(
    r"\.\. testcode::\n((?:[ \t]+:[^\n]*\n)*)\n((?:[ \t]*\n|[ \t]+[^\n]*\n)+?)\s*\.\. testoutput::\n"
    r"((?:[ \t]+:[^\n]*\n)*)\n((?:[ \t]*\n|[ \t]+[^\n]*\n)+?)(?=\s*(?:\.\.|\"\"\"|[A-Z][a-z]+:|$))",
    re.M,
)
_PREFIX = re.compile(r"^\[block \(\d+, \d+, \d+\)\] ", re.M)

SKIP = {
    "from_foreign": "raw pointers are not emulated by the CPU executor",
    "foreign_pointer": "raw pointers are not emulated by the CPU executor",
    "get_raw_memory": "raw pointers are not emulated by the CPU executor",
    "advanced_indexing": "advanced indexing is not emulated by the CPU executor",
    "pack_to_bytes": "byte packing is not emulated by the CPU executor",
    "unpack_from_bytes": "byte packing is not emulated by the CPU executor",
    "mma_scaled": "block-scaled fp8 mma_scaled is not emulated by the CPU executor",
    "float8": "fp8 tiles are not part of this project",
    "{op_name}": "a docstring template, not a runnable example",
}


def _examples():
    src = open(stub_module.__file__).read()
    defs = [(m.start(), m.group(1)) for m in re.finditer(r"^\s*def (\w+)", src, re.M)]
    out, seen = [], {}
    for m in _BLOCK.finditer(src):
        owner = [name for pos, name in defs if pos < m.start()][-1]
        seen[owner] = seen.get(owner, 0) + 1
        opts, code, out_opts, expected = m.groups()
        template = re.search(r":template:\s*(\S+)", opts)
        out.append(pytest.param(
            # the examples sit in ordinary (not raw) docstrings: "\\n" in the file is "\n" in the doc
            template.group(1) if template else "",
            textwrap.dedent(code).replace("\\\\", "\\"),
            opts + out_opts,
            textwrap.dedent(expected).strip("\n"), id=f"{owner}-{seen[owner]}",
        ))
    return out


EXAMPLES = _examples()


def _program(template: str, code: str) -> str:
    if template == "kernel_wrapper.py":
        body = textwrap.indent(code, "    ")
        code = f"@ct.kernel\ndef kernel():\n{body}\n\nct.launch(stream, (1,), kernel, ())\n"
    code = re.sub(r",\s*device=['\"]cuda(:0)?['\"]", "", code)
    code = re.sub(r"device=['\"]cuda(:0)?['\"],?\s*", "", code)
    code = code.replace("torch.cuda.synchronize()", "pass")
    return "import cuda.tile as ct\nimport torch\nimport numpy as np\nstream = None\n\n" + code


def test_examples_were_found():
    assert len(EXAMPLES) >= 100


@pytest.mark.parametrize("template,code,options,expected", EXAMPLES)
def test_stub_docstring_example(template, code, options, expected, tmp_path, monkeypatch, capsys):
    for needle, why in SKIP.items():
        if needle in code or needle in expected:
            pytest.skip(why)
    if "skipif" in options:
        pytest.skip("hardware-specific example")

    def cpu_launch(stream, grid, kernel, args):
        run_kernel(kernel, grid, args)

    monkeypatch.setattr(ct, "launch", cpu_launch)
    path = tmp_path / "example.py"
    path.write_text(_program(template, code))
    if expected.startswith("Traceback"):
        with pytest.raises(Exception):  # noqa: B017  (the documented outcome is a compile-time error)
            runpy.run_path(str(path), run_name="example")
        return
    runpy.run_path(str(path), run_name="example")
    got = _PREFIX.sub("", capsys.readouterr().out).strip("\n")
    if "NORMALIZE_WHITESPACE" in options:
        got, expected = " ".join(got.split()), " ".join(expected.split())
    assert got == expected
