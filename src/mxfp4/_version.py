"""The package version: read by pyproject.toml (setuptools' attr), the package and the checkpoint writer."""
__version__ = "0.2.0"
