"""Analyses of trained models: the test log-P matrix and its rank (paper §5), word similarity (SM §3),
top-5 predictions (SM Table 2) and the statistics the paper reports (t-tests, Pearson's r).
"""
