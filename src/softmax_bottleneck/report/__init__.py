"""Reporting: the paper's reported numbers as data, run summaries, every table and figure of the paper and
its supplementary material, and the study's cost (GPU-hours) projection.
"""
