"""The package's version, in a module of its own so that every layer may read it (the records,
the device's offline models) without importing the package's front (``mluverify/__init__.py``)."""
__version__ = "0.1.0"
