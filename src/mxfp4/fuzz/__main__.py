"""``python -m mxfp4.fuzz``: the same as ``mxfp4 fuzz`` (and ``--bad-inputs-table``)."""
import sys

from . import main

sys.exit(main())
