"""callsafe: certify code that turns streamed LLM tool-call fragments into tool executions.

The repository root is this package; each folder is a subpackage with one role, named in
the design page, ``docs/design.md`` (``model``, ``formal``, ``generators``, ``providers``,
``reference_impl``, ``diagrams``, ``contract``, ``targets``, ``certify``, ``reporting``,
``inspection``, ``campaigns``, ``cli``). The import paths of 0.1 keep working
(:mod:`callsafe._aliases`).
"""

from callsafe import _aliases

__version__ = "0.1.0"

_aliases.install()
