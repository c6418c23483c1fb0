"""The version, in one place: pyproject.toml reads it (setuptools' dynamic ``attr:``, statically,
without importing the package) and ``contractions.__version__`` re-exports it, so an installed
distribution, an editable install and a source checkout on ``PYTHONPATH`` all report the same."""

__version__ = "0.1.0"
