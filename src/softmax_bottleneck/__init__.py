"""Reproduction of "On the Softmax Bottleneck of Recurrent Language Models" (Parthiban, Mao & Inkpen, AAAI 2021).

The package holds the science of the study; the Snakemake workflow only calls :mod:`softmax_bottleneck.cli`.
"""

__version__ = "0.1.0"
