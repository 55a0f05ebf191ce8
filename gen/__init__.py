"""gen: a declarative long-document generator with a built-in decode engine."""

__version__ = "0.1.0"
