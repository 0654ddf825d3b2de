"""``callsafe observe``: production records judged with certify's invariants and readings.

The readers (:mod:`~callsafe.observe.jsonl_log`, :mod:`~callsafe.observe.otlp`,
:mod:`~callsafe.observe.guard_store`) turn records into :class:`~callsafe.observe.records.Records`;
:mod:`~callsafe.observe.judging` judges them and says what the records could establish;
:mod:`~callsafe.observe.follow` tails a growing file; :mod:`~callsafe.observe.output` writes
the console, JSON, HTML and JUnit forms.

Role: production; what an implementation did, judged from the records it left, and what
those records could not show.
"""
