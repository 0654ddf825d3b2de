"""callsafe: certify code that turns streamed LLM tool-call fragments into tool executions.

The repository root is this package; its folders are the subpackages named in DESIGN.md:
``callsafe.model`` (the declarative model), ``callsafe.generators``, ``callsafe.providers``,
``callsafe.reference_impl``, ``callsafe.targets`` and ``callsafe.certify``.
"""

__version__ = "0.1.0"
