"""From the SSD to a model: the Mamba-2 block, its decode step, a tiny language model and its training."""
