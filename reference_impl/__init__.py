"""The reference implementation: a sans-IO assembler that keeps every invariant, with its
stores, dispatcher, operator controls, ledger and audit.

Modules, from the inside out:

* :mod:`~callsafe.reference_impl.scanner`: incremental JSON syntax state (``re``, linear);
* :mod:`~callsafe.reference_impl.buffer`: one call's argument buffer (positions, caps'
  inputs, repeats, reassembly by position);
* :mod:`~callsafe.reference_impl.effects`: what the core asks for (effects, durable facts);
* :mod:`~callsafe.reference_impl.core`: the sans-IO core, ``Core.receive(event) -> effects``;
* :mod:`~callsafe.reference_impl.schema_check`: the core's schema check (a compiled validator
  that may only say "valid", jsonschema for everything else);
* :mod:`~callsafe.reference_impl.store`: the store contract and the restart snapshot;
  :mod:`~callsafe.reference_impl.memory_store`, :mod:`~callsafe.reference_impl.sqlite_store`,
  :mod:`~callsafe.reference_impl.postgres_store` (over :mod:`~callsafe.reference_impl.sql_store`);
* :mod:`~callsafe.reference_impl.driver`: performs the effects (the only I/O);
* :mod:`~callsafe.reference_impl.redaction`: copies for validators, no values in logs;
* :mod:`~callsafe.reference_impl.conformance`: does a run agree with the model?

The certification target is :class:`callsafe.targets.reference.ReferenceTarget`.

Role: the reference implementation, keeping every invariant. Imports only
:mod:`callsafe.model`.
"""
