"""The zoo's tests import its modules as the suites do (``suites`` on the path: ``zoo.*``)."""
import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO / "suites") not in sys.path:
    sys.path.insert(0, str(REPO / "suites"))

# The extra's packages (out of the default install): tests that build models skip without them.
ZOO_MISSING = [name for name in ("timm", "transformers") if importlib.util.find_spec(name) is None]
INSTALL = "pip install 'mluverify[zoo]'"
