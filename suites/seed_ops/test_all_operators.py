"""Run every op test of this directory, as the seeds' ``test_all_operators.py`` does:
``python test_all_operators.py`` (exit status 1 when one fails). Under pytest the op files are
collected themselves; this file holds no test."""
import sys
import unittest
from pathlib import Path


def main() -> int:
    suite = unittest.defaultTestLoader.discover(str(Path(__file__).parent), pattern="test_*.py")
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
