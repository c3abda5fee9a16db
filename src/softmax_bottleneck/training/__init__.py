"""Training: SGD → averaged SGD with the ET or NT switch, evaluation, checkpoints (paper §4, SM §2).

``trainer`` runs one model from its preset to ``model.pt``/``metrics.json``/``curve.csv``, resumably;
``schedule`` holds the optimisation schedule (variable BPTT, lr rescaling, SGD→ASGD switch rules,
averaged weights); ``state`` the resumable state (progress, RNG states, fingerprint, ``.resume/``);
``run_files`` what a run folder shows while it trains (``curve.csv``, ``.resume/progress.json``, the time left);
``environment`` the device and the software record; ``evaluation`` is the reference's loss and
perplexity; ``checkpoint`` writes and reads ``model.pt``.
"""
