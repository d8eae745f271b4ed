"""``python -m jaxrna``: the same entry point as the ``jaxrna`` console script."""

import sys

from jaxrna.cli import main

sys.exit(main())
