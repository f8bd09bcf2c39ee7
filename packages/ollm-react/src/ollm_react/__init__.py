"""ollm_react (work in progress)."""

from ollm_react._version import __version__

__all__ = ["__version__"]
