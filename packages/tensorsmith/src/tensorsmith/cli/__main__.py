"""``python -m tensorsmith.cli`` is the ``tensorsmith`` command."""

import sys

from tensorsmith.cli.main import main

sys.exit(main())
