"""`python -m scratchformer ...` (and `torchrun -m scratchformer train ...`)."""

import sys

from scratchformer.cli import main

sys.exit(main())
