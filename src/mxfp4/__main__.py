"""``python -m mxfp4``: the same as the ``mxfp4`` command."""
import sys

from .cli import main

sys.exit(main())
