"""Quick (CI) vs deep soundness runs.

``LASTITERATE_SOUNDNESS_DEEP=1`` draws many more (and larger) random runs and uses a finer grid
for the projected walk; ``LASTITERATE_SOUNDNESS_SEED`` changes the seed (default 20261124).
"""

from __future__ import annotations

import os

DEEP = os.environ.get("LASTITERATE_SOUNDNESS_DEEP") == "1"
SEED = int(os.environ.get("LASTITERATE_SOUNDNESS_SEED", "20261124"))
#: random runs per test session
COUNT = int(os.environ.get("LASTITERATE_SOUNDNESS_COUNT", "400" if DEEP else "30"))
#: grid cells of the projected-walk bracket
CELLS = 1200 if DEEP else 400
