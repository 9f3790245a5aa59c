"""The game's rules: hands, wagers, paytables, settlement, strategy and the exact reports.

numpy (the integer sums of :mod:`table.rules.report` and :mod:`table.rules.expectation`, the
only modules that import it) starts OpenBLAS's thread pool, a thread a core, when first
imported: ~40 ms of CPU in every ``tablectl report`` on 2 cores, for threads those sums never
use (they call no BLAS routine). So one thread, unless the environment already names a number.
"""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
