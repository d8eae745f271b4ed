"""The single source of jaxrna's version number."""

__version__ = "0.1.0"
