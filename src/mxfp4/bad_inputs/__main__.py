"""``python -m mxfp4.bad_inputs``: docs/bad_inputs.md on stdout."""
from . import markdown_table

print(markdown_table(), end="")
