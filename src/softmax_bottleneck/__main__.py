"""``python -m softmax_bottleneck``: see :mod:`softmax_bottleneck.cli`."""

import sys

from softmax_bottleneck.cli import main

sys.exit(main(heartbeat=True))
