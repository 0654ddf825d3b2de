"""The reference implementation: a sans-IO assembler that keeps every invariant, with its
stores, dispatcher, operator controls, ledger and audit."""
