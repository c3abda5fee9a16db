"""The study itself: which training runs a configuration asks for, how each is named, what they cost.

* :mod:`.config`: a workflow configuration checked as a whole (its schema, then what the schema cannot say:
  variant names against the registry, variant × dataset, hyper-parameter names, types and ranges);
* :mod:`.runs`: :class:`~.runs.Run` and :class:`~.runs.Study`, the expansion of a configuration into its runs
  (experiments E1–E10 and the analyses' reference models), each named ``{tag}-{hash}`` by its identity;
* :mod:`.plan`: the training plan (one row per distinct run: its experiments and projected GPU-hours) and the
  paper's V100 seconds per epoch that project it.

The Snakefile, ``costs`` and the tests all read the run set from here; nothing else expands a configuration.
"""
