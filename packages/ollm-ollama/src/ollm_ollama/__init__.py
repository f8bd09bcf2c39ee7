"""ollm_ollama (work in progress)."""

from ollm_ollama._version import __version__

__all__ = ["__version__"]
