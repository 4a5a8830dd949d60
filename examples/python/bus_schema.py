"""Checks Tether bus messages against docs/bus.schema.json.

A small validator for the part of JSON Schema the bus schema uses (type, const, enum,
required, properties, additionalProperties, items, $ref, allOf, anyOf, if/then, pattern,
minimum, maximum), so the example needs nothing beyond pyzmq.

    python3 bus_schema.py docs/bus.schema.json recording.jsonl

checks every line of a tap recording (tether-tap --record or --json) and exits 1 if one
does not match.
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
    """The bus schema, loaded from its file."""

    def __init__(self, path):
        with open(path, encoding="utf-8") as file:
            self.root = json.load(file)

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
        found = []
        self._check(value, schema, where, found)
        return found


def main(arguments):
    if len(arguments) != 2:
        print("usage: bus_schema.py SCHEMA RECORDING", file=sys.stderr)
        return 2
    schema = Schema(arguments[0])
    checked, bad, topics = 0, 0, set()
    with open(arguments[1], encoding="utf-8") as file:
        for number, line in enumerate(file, 1):
            message = json.loads(line)
            if "note" in message:
                continue
            checked += 1
            topics.add(message.get("topic"))
            for error in schema.errors(message):
                bad += 1
                print(f"line {number} ({message.get('topic')}): {error}")
    print(f"{checked} messages on {len(topics)} topics checked: {bad} problems")
    return 1 if bad or not checked else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
