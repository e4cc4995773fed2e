"""``python -m fuzz``: see :func:`fuzz.runner.main`."""

import sys

from fuzz.runner import main

sys.exit(main())
