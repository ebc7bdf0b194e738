"""``python -m mxfp4.fuzz``: the same as ``mxfp4 fuzz``."""
import sys

from . import main

sys.exit(main())
