"""`python -m gen.cli`: the same as the `gen` command."""

import sys

from gen.cli import main

sys.exit(main())
