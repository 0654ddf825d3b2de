"""A raw callsafe-target program (no helper library) that misbehaves once per run.

``python misbehave.py MODE``: answers the protocol like a target that never executes
anything, until the first ``fragment`` event after the marker file named by
``$CALLSAFE_TEST_MARK`` does not exist yet; then it creates the marker and
``crash``es (exit 3), ``hang``s, prints ``garbage`` or answers with a message of
``another-version``. ``version`` answers ``init`` with protocol version 2 from the start.
Each mode says so on stderr first, so the test can find it in the reported tail.
"""

import json
import os
import sys
import time

MODE = sys.argv[1]
CAPABILITIES = [
    "business_validation",
    "cancellation",
    "catalog_changes",
    "confirmation",
    "ledger",
    "operator_controls",
    "restart",
    "status",
    "turn_binding",
]
MARK = os.environ.get("CALLSAFE_TEST_MARK", "")


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def misbehave_now():
    if not MARK or os.path.exists(MARK):
        return False
    open(MARK, "w").close()
    return True


for line in sys.stdin:
    message = json.loads(line)
    kind = message["type"]
    if kind == "init":
        version = 2 if MODE == "version" else 1
        print(f"misbehave: speaking version {version}", file=sys.stderr, flush=True)
        send(
            {
                "type": "init_ok",
                "id": message["id"],
                "protocol": "callsafe-target",
                "version": version,
                "name": f"misbehave-{MODE}",
                "reads": "abstract",
                "capabilities": CAPABILITIES,
            }
        )
        continue
    if kind == "shutdown":
        break
    if kind == "event" and "fragment" in message["event"] and misbehave_now():
        print(f"misbehave: about to {MODE}", file=sys.stderr, flush=True)
        if MODE == "crash":
            sys.exit(3)
        if MODE == "hang":
            time.sleep(3600)
        if MODE == "garbage":
            print("this is not JSON", flush=True)
            continue
        if MODE == "another-version":
            send({"type": "done_v2", "id": message["id"]})
            continue
    send({"type": "done", "id": message["id"], "error": None})
