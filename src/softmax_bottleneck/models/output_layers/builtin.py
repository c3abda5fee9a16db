"""The paper's output layers, imported in the paper's order (Softmax, SS, GSS, LMS-PLIF, LMS-PLIF†, MoS, MoC)
so that their registrations keep that order."""

from . import softmax  # noqa: F401  (isort: skip)
from . import sigsoftmax  # noqa: F401  (isort: skip)
from . import gss  # noqa: F401  (isort: skip)
from . import plif  # noqa: F401  (isort: skip)
from . import mixtures  # noqa: F401  (isort: skip)
