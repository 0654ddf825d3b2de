"""The declarative model of streamed tool-call assembly.

``vocabulary`` (keys, events, observations, traces), ``lifecycle`` (the per-call table),
``system`` (turns, tenants, operator controls, restart, and the executable semantics),
``oracle`` (verdicts per call), ``invariants`` (checkers over observations), ``abstract``
and ``graph`` (the finite transition system and its state graph), ``compiled`` (the same
rules as generated Python: the explorer's inner loop), ``diagrams``.
The formal side: ``ops`` (the operations the abstract rules are written in, so that one
text is read as values, z3 terms and TLA+), ``z3_encoding`` and ``z3_proof`` (bounded model
checking, k-induction), ``lemmas`` (strengthening by Houdini), ``mutants`` (deliberately
wrong models), ``tla`` (TLA+ export, TLC runner), ``explain`` (counterexamples in words).
Nothing here imports anything else of the project.
"""
