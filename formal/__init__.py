"""Everything that reads the rules over ``Ops``: the explorer, z3, TLA+, lemmas and the
deliberately wrong models.

``abstract`` (the finite transition system: initial states, actions, next state),
``ops`` (the operations the abstract rules are written in, so that one text is read as
values, z3 terms and TLA+), ``compiled`` (those rules as one generated Python step
function: the explorer's inner loop), ``graph`` (the reachable state graph),
``summary`` (its statistics, for ``callsafe model``), ``z3_encoding`` and ``z3_proof``
(bounded model checking, k-induction), ``lemmas`` (strengthening by Houdini), ``tla``
(TLA+ export, TLC runner), ``mutants`` (wrong models the proofs must reject), ``explain``
(abstract counterexamples in words).

Role: formal back ends of :mod:`callsafe.model`; imports only the model.
"""
