"""The target side of the callsafe target protocol, for programs certified as
``exec:COMMAND`` (:mod:`callsafe.contract.exec_protocol`).

``stdio.serve(factory)`` turns any Python :class:`~callsafe.contract.target.Target` into a
program that speaks the protocol on its stdin and stdout; ``python -m
callsafe.adapters.reference`` is the reference implementation behind it, and
``openai_sdk_example`` an unmodified ``openai`` SDK stream read through callsafe's loopback
provider (wire mode over HTTP), ``openai_realtime_example`` the ``openai`` SDK's realtime
client over the loopback's WebSocket, running calls as OpenAI's Realtime guide does. The
TypeScript helper is ``adapters/node/`` (``src/callsafe-target.ts``, compiled by ``npm run
build``).

Role: what a user's program imports to be certified from another process. Imports only the
contract and the vocabulary (and, for the reference entry point, the reference target).
"""
