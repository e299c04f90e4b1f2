"""`python -m policies`: the same command as the `ddp-check` console script (policies.cli:main)."""
import sys

from policies.cli import main

sys.exit(main())
