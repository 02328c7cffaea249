"""``python -m mluverify.cli``: the ``mluverify`` command."""
import sys

from mluverify.cli import main

sys.exit(main())
