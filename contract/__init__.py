"""The Target contract: what a certified implementation is handed (``TargetEnv``: the
executor spy, the catalog, the business validator, the limits) and what it must do
(``Target``: ``start``, ``receive``, ``restart``, ``close``) and declare (capabilities).

Role: the one interface between the harness and every adapter. It sits below both, so an
adapter depends on this small module, never on the harness. Imports only
:mod:`callsafe.model`.
"""
