"""``python -m gameday.cli``: the ``gameday`` command, for a checkout without the console script."""

import sys

from gameday.cli.main import main

sys.exit(main())
