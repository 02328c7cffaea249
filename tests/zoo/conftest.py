"""The zoo's tests import its modules as the suites do (``suites`` on the path: ``zoo.*``)."""
import sys
from pathlib import Path

SUITES = Path(__file__).resolve().parents[2] / "suites"
if str(SUITES) not in sys.path:
    sys.path.insert(0, str(SUITES))
