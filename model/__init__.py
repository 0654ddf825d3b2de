"""The declarative model of streamed tool-call assembly.

``vocabulary`` (keys, events, observations, traces), ``lifecycle`` (the per-call table),
``system`` (turns, tenants, operator controls, restart, and the executable semantics),
``oracle`` (verdicts per call), ``invariants`` (checkers over observations), ``abstract``
and ``graph`` (the finite transition system and its state graph), ``diagrams``.
Nothing here imports anything else of the project.
"""
