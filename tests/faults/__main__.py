"""`python -m tests.faults` (`make faults`): see `tests.faults.suite`."""

import sys

from .suite import main

sys.exit(main())
