"""Performance tooling: the benchmark (``python -m mamba2_tutorial bench``), rooflines, CUDA timing, the
results files and their plots. Notebooks 09 and 10 read the shipped results through these modules."""
