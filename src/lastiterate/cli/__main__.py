"""``python -m lastiterate.cli``: the command line."""

import sys

from lastiterate.cli import main

sys.exit(main())
