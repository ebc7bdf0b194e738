"""``python -m mxfp4.fuzz``: ``mxfp4 fuzz`` itself (the CLI's subcommand, its checks and messages)."""
import sys

from ..cli import main

sys.exit(main(["fuzz", *sys.argv[1:]]))
