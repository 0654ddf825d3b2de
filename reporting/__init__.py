"""What a certification leaves behind: ``report`` (``report.json``, JUnit XML, the HTML
report) and ``diagram_files`` (the diagram files ``callsafe render`` writes, from the model
or from a ``report.json``).

Role: reports for people and CI, from a :class:`~callsafe.certify.harness.Certification`
or from the JSON a run wrote.
"""
