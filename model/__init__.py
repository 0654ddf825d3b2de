"""The spec as code: the vocabulary, the lifecycle table and the system rules, and what
judges a run by them.

``vocabulary`` (keys, events, observations, traces), ``lifecycle`` (the per-call table,
pure data), ``system`` (turns, tenants, operator controls, restart: the guards that resolve
an input against its call, and the broadcasts), ``oracle`` (the verdict for every call of
a concrete trace), ``invariants`` (checkers over a trace and what a target was seen to
do), ``builder`` (traces by hand).

Role: the rules, and nothing that reads them another way (the explorer, z3, TLA+ are in
:mod:`callsafe.formal`; drawings in :mod:`callsafe.diagrams`). Lowest floor: nothing here
imports anything else of the project.
"""
