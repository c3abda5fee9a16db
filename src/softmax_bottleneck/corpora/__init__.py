"""Data: the corpora (Penn Treebank, WikiText-2) read as the reference reads them, and verified downloads.

``corpus`` tokenises, numbers and batches the splits (paper §4, SM §1); ``download`` fetches or copies every
data file, the 13 word-similarity benchmarks included, and checks its SHA-256.
"""
