"""The pytest front end: what ``pytest -p mluverify`` adds.

``plugin`` (options, markers, the ``verify`` fixture; the ``pytest11`` entry point), ``run``
(one run's report directory, from claim to swap), ``cases`` (captured cases as items,
``--mlu-cases``) and ``reproducer`` (the command that re-runs one failing case).
"""
