"""`python -m policies.simulate`: see cli.py."""
import sys

from .cli import main

sys.exit(main())
