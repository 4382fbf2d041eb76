"""`python -m vpatch.cli`."""

import sys

from . import main

sys.exit(main())
