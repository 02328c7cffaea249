"""Sub-commands of the ``mluverify`` CLI, one module each."""
