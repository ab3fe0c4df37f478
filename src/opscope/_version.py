"""The package version, in the lowest layer so that every layer (the CLI's --version, the HTML report's footer)
can read it without importing the package's top-level API."""

__version__ = "0.1.0"
