"""Command line: ``python -m mamba2_tutorial {env,compile,bench,bench-train,tune} [...]``."""

from __future__ import annotations

import argparse
import importlib
import sys

COMMANDS = {
    "env": ("lessons.env", "print the environment report (versions, GPU, which tier runs the kernels)"),
    "compile": ("runtime.compile", "compile every kernel ahead of time with tileiras (no GPU needed)"),
    "bench": ("perf.bench", "benchmark ssd_forward against mamba_ssm, fla and PyTorch on the GPU"),
    "bench-train": ("perf.bench_train", "benchmark forward + backward against mamba_ssm and fla on the GPU"),
    "tune": ("perf.tune", "make a tuned config table for this GPU with cuTile's tuner (cuda.tile.tune)"),
}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="python -m mamba2_tutorial", description=__doc__)
    summary = "; ".join(f"{name}: {text}" for name, (_, text) in COMMANDS.items())
    parser.add_argument("command", choices=sorted(COMMANDS), help=summary)
    if not argv or argv[0] in ("-h", "--help"):
        parser.print_help()
        return 0 if argv else 2
    args = parser.parse_args(argv[:1])
    if args.command == "compile":   # the compile check covers the kernels these packages register
        importlib.import_module("mamba2_tutorial.kernels")
        importlib.import_module("mamba2_tutorial.fast")
    module = importlib.import_module(f"mamba2_tutorial.{COMMANDS[args.command][0]}")
    return int(module.main(argv[1:]) or 0)


if __name__ == "__main__":
    sys.exit(main())
