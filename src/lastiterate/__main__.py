"""``python -m lastiterate``: the command line."""

import sys

from lastiterate.cli import main

sys.exit(main())
