"""ollm_testutils (work in progress)."""

from ollm_testutils._version import __version__

__all__ = ["__version__"]
