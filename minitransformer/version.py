"""The version, in one place below every module that prints it."""

__version__ = "0.1.0"
