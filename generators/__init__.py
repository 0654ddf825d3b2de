"""Adversarial abstract traces, as data (callsafe's own events, never a wire protocol).

* :mod:`~callsafe.generators.catalog`: named scenarios from the spec and public bug reports;
* :mod:`~callsafe.generators.exhaustive`: every trace up to a bound, call ids symmetric;
* :mod:`~callsafe.generators.coverage`: greedy paths over the state graph covering every
  transition and pair of transitions, and the measure of what traces reach;
* :mod:`~callsafe.generators.concretise`: abstract paths to concrete traces;
* :mod:`~callsafe.generators.walks`: seeded random walks over the state graph;
* :mod:`~callsafe.generators.strategies` and :mod:`~callsafe.generators.machine`:
  hypothesis strategies and a rule-based state machine for users' own test suites;
* :mod:`~callsafe.generators.needs`: the capabilities a trace needs, and the bounded
  configurations that fit a target.

Role: adversarial abstract traces, as data. Imports only :mod:`callsafe.model` and
:mod:`callsafe.formal` (the state graph the walks and coverage paths are drawn from).
"""
