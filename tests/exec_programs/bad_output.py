"""A raw callsafe-target program whose output breaks the protocol in one way.

``python bad_output.py MODE [MIB]``:

* ``silent``: reads its stdin and never answers ``init``;
* ``non-utf8``: answers ``init`` with a line that is valid JSON but not UTF-8;
* ``huge-init``: answers ``init`` with one line of MIB mebibytes (default 8), written in
  pieces so that this program never holds it whole;
* ``huge-later``: answers ``init`` properly (capabilities: none), writes MIB mebibytes on
  one stderr line, and answers the first event with a line of MIB mebibytes on stdout.
"""

import json
import sys
import time

MODE = sys.argv[1]
MIB = int(sys.argv[2]) if len(sys.argv) > 2 else 8
CHUNK = b"x" * (1 << 20)


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def huge(stream):
    stream.write(b'{"type": "done", "pad": "')
    for _ in range(MIB):
        stream.write(CHUNK)
    stream.write(b'"}\n')
    stream.flush()


for line in sys.stdin:
    message = json.loads(line)
    kind = message["type"]
    if kind == "init":
        if MODE == "silent":
            time.sleep(3600)
        if MODE == "non-utf8":
            sys.stdout.buffer.write(b'{"type": "init_ok", "id": 0, "name": "caf\xe9", "reads": "abstract"}\n')
            sys.stdout.buffer.flush()
            continue
        if MODE == "huge-init":
            huge(sys.stdout.buffer)
            continue
        send(
            {
                "type": "init_ok",
                "id": message["id"],
                "protocol": "callsafe-target",
                "version": 1,
                "name": f"bad-output-{MODE}",
                "reads": "abstract",
                "capabilities": [],
            }
        )
        continue
    if kind == "shutdown":
        break
    if kind == "event" and MODE == "huge-later":
        huge(sys.stderr.buffer)
        huge(sys.stdout.buffer)
        continue
    send({"type": "done", "id": message["id"], "error": None})
