"""Checks Tether bus messages against docs/bus.schema.json.

A small validator for the part of JSON Schema the bus schema uses (type, const, enum,
required, properties, additionalProperties, items, $ref, allOf, anyOf, if/then, pattern,
minimum, maximum), so the example needs nothing beyond pyzmq.

    python3 bus_schema.py docs/bus.schema.json recording.jsonl [--complete]

checks every line of a tap recording (tether-tap --record or --json) and exits 1 if one
does not match. With --complete it also finds what the schema leaves out: a topic it does
not describe, a field it does not list.

    python3 bus_schema.py docs/bus.schema.json --commands RUN_DIR [--complete] [--openclaw]

sends every command of the running set in RUN_DIR (pyzmq), each valid and some not, and
checks each reply against its definition, or an error reply against CommandError and the
code it must carry (--openclaw: the set chats with an OpenClaw gateway, where sessions and
abort are answered).
"""

import json
import re
import sys

_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


class Schema:
    """The bus schema, loaded from its file. `complete` also reports fields an object's
    definition does not list."""

    def __init__(self, path, complete=False):
        with open(path, encoding="utf-8") as file:
            self.root = json.load(file)
        self.complete = complete

    def describes(self, topic):
        """Whether the schema says what the body of `topic` is."""
        for part in self.root.get("allOf", []):
            condition = part.get("if", {}).get("properties", {}).get("topic", {})
            if condition.get("const") == topic or ("pattern" in condition and re.search(condition["pattern"], topic)):
                return True
        return False

    def errors(self, value, definition=None):
        """What is wrong with `value` against the root schema, or the named $defs entry."""
        schema = self.root if definition is None else self.root["$defs"][definition]
        found = []
        self._check(value, schema, "$", found)
        return found

    def _resolve(self, reference):
        if not reference.startswith("#/$defs/"):
            raise ValueError("unsupported $ref " + reference)
        return self.root["$defs"][reference[len("#/$defs/"):]]

    def _check(self, value, schema, where, found):
        if "$ref" in schema:
            self._check(value, self._resolve(schema["$ref"]), where, found)
        if "type" in schema:
            kinds = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
            if not any(_TYPES[kind](value) for kind in kinds):
                found.append(f"{where}: expected {' or '.join(kinds)}, got {json.dumps(value)[:60]}")
                return
        if "const" in schema and value != schema["const"]:
            found.append(f"{where}: expected {json.dumps(schema['const'])}")
        if "enum" in schema and value not in schema["enum"]:
            found.append(f"{where}: {json.dumps(value)[:60]} is not one of {schema['enum']}")
        if isinstance(value, str) and "pattern" in schema and not re.search(schema["pattern"], value):
            found.append(f"{where}: {value[:60]!r} does not match {schema['pattern']}")
        if _TYPES["number"](value):
            if "minimum" in schema and value < schema["minimum"]:
                found.append(f"{where}: {value} is below {schema['minimum']}")
            if "maximum" in schema and value > schema["maximum"]:
                found.append(f"{where}: {value} is above {schema['maximum']}")
        if isinstance(value, dict):
            for name in schema.get("required", []):
                if name not in value:
                    found.append(f"{where}: {name} is missing")
            properties = schema.get("properties", {})
            for name, field in value.items():
                if name in properties:
                    self._check(field, properties[name], f"{where}.{name}", found)
                elif isinstance(schema.get("additionalProperties"), dict):
                    self._check(field, schema["additionalProperties"], f"{where}.{name}", found)
                elif self.complete and schema.get("type") == "object" and "properties" in schema and "additionalProperties" not in schema:
                    found.append(f"{where}.{name}: a field the schema does not list")
        if isinstance(value, list) and "items" in schema:
            for index, item in enumerate(value):
                self._check(item, schema["items"], f"{where}[{index}]", found)
        for part in schema.get("allOf", []):
            self._check(value, part, where, found)
        if "anyOf" in schema:
            if all(self._errors_of(value, part, where) for part in schema["anyOf"]):
                found.append(f"{where}: matches none of the allowed shapes")
        if "if" in schema and not self._errors_of(value, schema["if"], where) and "then" in schema:
            self._check(value, schema["then"], where, found)

    def _errors_of(self, value, schema, where):
        # A condition (if, anyOf) names only what it tests: the rest of the object is not extra.
        complete, self.complete = self.complete, False
        found = []
        self._check(value, schema, where, found)
        self.complete = complete
        return found


def check_recording(schema, path):
    """Checks every message of a recording; returns the number of problems."""
    checked, bad, topics = 0, 0, set()
    with open(path, encoding="utf-8") as file:
        for number, line in enumerate(file, 1):
            message = json.loads(line)
            if "note" in message:
                continue
            checked += 1
            topic = message.get("topic")
            topics.add(topic)
            problems = schema.errors(message)
            if schema.complete and isinstance(topic, str) and not schema.describes(topic):
                problems.append(f"topic {topic} is not described by the schema")
            for error in problems:
                bad += 1
                print(f"line {number} ({topic}): {error}")
    print(f"{checked} messages on {len(topics)} topics checked: {bad} problems")
    print("topics: " + " ".join(sorted(topic for topic in topics if isinstance(topic, str) and not topic.startswith("sys.probe."))))
    return bad if checked else 1


# Each command once as it should be sent, and some as it should not: (endpoint, method,
# body, the reply's definition when it succeeds, or the error code it must be refused with).
def command_cases(run_id, dialect):
    message = {"value": "schema-check-" + run_id}
    retry = {"attempts": 0, "delayMilliseconds": 200, "timeoutMilliseconds": 10000}
    openclaw_only = "SessionsReply" if dialect == "openclaw" else "refused"
    return [
        ("protod.cmd", "send", {"id": message, "content": "schema check"}, "SendReply"),
        ("protod.cmd", "send", {"id": {"value": "blank-" + run_id}, "content": "  \n "}, "refused"),
        ("protod.cmd", "send", {"id": {"value": "bounds-" + run_id}, "content": "x", "retry": retry}, "outOfBounds"),
        ("protod.cmd", "send", {"content": "no id"}, "malformed"),
        ("protod.cmd", "cancel", {"id": {"value": "nothing-" + run_id}}, "CancelReply"),
        ("protod.cmd", "journal", {"after": 0, "limit": 5}, "JournalReply"),
        ("protod.cmd", "journal", {"after": 0, "limit": 5000}, "outOfBounds"),
        ("protod.cmd", "sessions", {}, openclaw_only),
        ("protod.cmd", "abort", {}, "AbortReply" if dialect == "openclaw" else "refused"),
        ("protod.cmd", "approvals", {}, "ApprovalsUpdate"),
        ("protod.cmd", "models", {}, "ModelsReply" if dialect == "openclaw" else "refused"),
        ("protod.cmd", "agents", {}, "AgentsReply" if dialect == "openclaw" else "refused"),
        ("protod.cmd", "session.set", {"id": {"value": "schema-think-" + run_id}, "thinking": "extreme"}, "refused"),
        ("protod.cmd", "session.set", {"id": {"value": "schema-none-" + run_id}}, "outOfBounds"),
        ("protod.cmd", "approve", {"id": "no-such-approval", "decision": "deny"}, "refused"),
        ("protod.cmd", "approve", {"id": "x", "decision": "maybe"}, "malformed"),
        ("protod.cmd", "no.such.method", {}, "unknownMethod"),
        ("snapd.cmd", "transcript", {"limit": 5}, "TranscriptReply"),
        ("snapd.cmd", "transcript", {"limit": 0}, "outOfBounds"),
        ("snapd.cmd", "search", {"words": "schema", "limit": 5}, "SearchReply"),
        ("snapd.cmd", "search", {"words": "?!", "limit": 5}, "refused"),
        ("snapd.cmd", "search", {"words": "schema", "limit": 500}, "outOfBounds"),
        ("snapd.cmd", "snapshot", {"frontEnd": "schema-check", "limit": 5}, "SnapshotReply"),
        ("snapd.cmd", "display.save",
         {"frontEnd": "schema-check", "screen": ["line"], "scrollOffset": 0, "draft": "", "history": [],
          "savedAt": "2026-01-01T00:00:00.000Z"}, "DisplaySaveReply"),
        ("snapd.cmd", "snapshot", "not an object", "malformed"),
        ("snapd.cmd", "snapshot", "x" * (1024 * 1024 + 1), "tooLarge"),
        ("connd.cmd", "connection", {"action": "resume", "reason": "schema check"}, "ConnectionReply"),
        ("connd.cmd", "connection", {"action": "explode"}, "malformed"),
        # Last: it has connd reconnect.
        ("protod.cmd", "recover", {}, "RecoverReply"),
    ]


REQUESTS = {"send": "SendRequest", "cancel": "CancelRequest", "recover": "RecoverRequest", "journal": "JournalRequest",
            "sessions": "SessionsRequest", "models": "ModelsRequest", "agents": "AgentsRequest", "session.set": "SessionSetRequest", "abort": "AbortRequest", "approvals": "ApprovalsRequest", "approve": "ApproveRequest", "transcript": "TranscriptRequest", "search": "SearchRequest",
            "snapshot": "SnapshotRequest", "display.save": "DisplaySaveRequest", "connection": "ConnectionRequest"}


def check_commands(schema, run_directory, dialect):
    """Sends every command case to the set in `run_directory`; returns the number of problems."""
    import uuid
    import zmq

    context = zmq.Context()
    bad = 0
    codes = {code for code in schema.root["$defs"]["CommandError"]["properties"]["code"]["enum"]}
    for endpoint, method, body, expected in command_cases(uuid.uuid4().hex[:8], dialect):
        succeeds = expected not in codes
        if succeeds:
            for error in schema.errors(body, REQUESTS[method]):
                bad += 1
                print(f"{endpoint} {method} request: {error}")
        socket = context.socket(zmq.DEALER)
        socket.setsockopt(zmq.LINGER, 0)
        socket.connect(f"ipc://{run_directory}/{endpoint}")
        request_id = uuid.uuid4().hex
        payload = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        socket.send_multipart([request_id.encode(), method.encode(), payload])
        if not socket.poll(20000):
            bad += 1
            print(f"{endpoint} {method}: no answer in 20 s")
            socket.close()
            continue
        reply = socket.recv_multipart()
        socket.close()
        if len(reply) != 3 or reply[0].decode() != request_id:
            bad += 1
            print(f"{endpoint} {method}: a reply of {len(reply)} frames, or for another request")
            continue
        status, answer = reply[1].decode(), json.loads(reply[2])
        found = schema.errors(answer, expected if status == "ok" else "CommandError")
        if succeeds and status != "ok":
            found.append(f"answered {status} {answer}, expected {expected}")
        if not succeeds and (status != "error" or answer.get("code") != expected):
            found.append(f"answered {status} {answer}, expected the error {expected}")
        for error in found:
            bad += 1
            print(f"{endpoint} {method}: {error}")
        if not found:
            print(f"{endpoint} {method}: {status}" + (f" {answer['code']}" if status == "error" else ""))
    context.term()
    print(f"commands checked: {bad} problems")
    return bad


def main(arguments):
    complete = "--complete" in arguments
    arguments = [argument for argument in arguments if argument != "--complete"]
    dialect = "seed"
    if "--openclaw" in arguments:
        dialect = "openclaw"
        arguments = [argument for argument in arguments if argument != "--openclaw"]
    if len(arguments) == 3 and arguments[1] == "--commands":
        return 1 if check_commands(Schema(arguments[0], complete), arguments[2], dialect) else 0
    if len(arguments) != 2:
        print("usage: bus_schema.py SCHEMA RECORDING [--complete] | SCHEMA --commands RUN_DIR [--complete] [--openclaw]", file=sys.stderr)
        return 2
    return 1 if check_recording(Schema(arguments[0], complete), arguments[1]) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
