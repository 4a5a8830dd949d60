#!/usr/bin/env python3
"""A Tether front end in Python: chats with the bot through the bus, using only the
published schema (docs/BUS.md and docs/bus.schema.json). It needs pyzmq and nothing of
Tether's code.

    python3 tether_chat.py                      # chat: lines you type are sent
    python3 tether_chat.py --send "hello"       # send one message, print the reply, exit
    python3 tether_chat.py --inbox FIFO         # also send each line written to FIFO

Exit codes of --send: 0 the reply came, 1 the message failed or an error, 2 no reply in
time, 3 a message did not match the schema (with --strict), 4 the bus is not there.
"""

import argparse
import datetime
import json
import os
import signal
import stat
import sys
import time
import uuid

import zmq

from bus_schema import Schema

FRONT_END = "example-python"
SOURCE = "tether-python"
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_SCHEMA = os.path.join(REPO, "docs", "bus.schema.json")


class BusUnavailable(Exception):
    pass


class SchemaViolation(Exception):
    pass


def run_directory(explicit):
    """As docs/BUS.md says: $TETHER_RUN, else $XDG_RUNTIME_DIR/tether, else /tmp/tether-$UID."""
    if explicit:
        return explicit
    if os.environ.get("TETHER_RUN"):
        return os.environ["TETHER_RUN"]
    if os.environ.get("XDG_RUNTIME_DIR"):
        return os.path.join(os.environ["XDG_RUNTIME_DIR"], "tether")
    return f"/tmp/tether-{os.getuid()}"


def now():
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Bus:
    """Publishes into bus.in, subscribes at bus.out and sends commands to the programs'
    request endpoints, as docs/BUS.md describes. Every message received is checked against
    the schema."""

    def __init__(self, run_dir, schema, strict):
        self.run_dir = run_dir
        self.schema = schema
        self.strict = strict
        self.context = zmq.Context.instance()
        self.sequence = 0
        self.violations = 0
        # Messages that arrived while waiting for the probe, delivered before any newer one.
        self.pending = []
        self.publisher = self.context.socket(zmq.PUB)
        self.publisher.setsockopt(zmq.LINGER, 1000)
        self.publisher.connect(self.endpoint("bus.in"))
        self.subscriber = self.context.socket(zmq.SUB)
        self.subscriber.setsockopt(zmq.LINGER, 0)
        self.subscriber.connect(self.endpoint("bus.out"))

    def endpoint(self, name):
        return "ipc://" + os.path.join(self.run_dir, name)

    def publish(self, topic, body):
        self.sequence += 1
        header = {"schema": 1, "source": SOURCE, "pid": os.getpid(), "sequence": self.sequence,
                  "timestamp": now(), "replay": False}
        self.publisher.send_multipart([topic.encode(), json.dumps(header, sort_keys=True).encode(),
                                       json.dumps(body, sort_keys=True).encode()])

    def subscribe(self, prefixes, timeout=5.0):
        """Subscribes and waits until a probe of our own comes back through the proxy, so
        nothing published afterwards is missed."""
        probe = "sys.probe." + uuid.uuid4().hex
        for prefix in list(prefixes) + [probe]:
            self.subscriber.setsockopt(zmq.SUBSCRIBE, prefix.encode())
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.publish(probe, {})
            if self.subscriber.poll(100):
                frames = self.subscriber.recv_multipart()
                if frames[0].decode(errors="replace") == probe:
                    self.subscriber.setsockopt(zmq.UNSUBSCRIBE, probe.encode())
                    return
                self.pending.append(frames)
        raise BusUnavailable(f"no bus answers in {self.run_dir} (is the set running?)")

    def receive(self, timeout_ms):
        """The next message as (topic, header, body), or None after `timeout_ms`."""
        if self.pending:
            frames = self.pending.pop(0)
        elif self.subscriber.poll(timeout_ms):
            frames = self.subscriber.recv_multipart()
        else:
            return None
        if len(frames) != 3:
            self.violation(f"a message of {len(frames)} frames instead of 3")
            return None
        try:
            topic = frames[0].decode()
            header, body = json.loads(frames[1]), json.loads(frames[2])
        except ValueError as error:
            self.violation(f"an unreadable message: {error}")
            return None
        if topic.startswith("sys.probe."):
            return None
        self.check({"topic": topic, "header": header, "body": body}, None, topic)
        return topic, header, body

    def check(self, value, definition, what):
        for error in self.schema.errors(value, definition):
            self.violation(f"{what}: {error}")

    def violation(self, text):
        self.violations += 1
        print(f"schema: {text}", file=sys.stderr, flush=True)
        if self.strict:
            raise SchemaViolation(text)

    def request(self, endpoint, method, body, reply_definition, timeout=2.5, attempts=3):
        """Sends a command; on each timeout a new socket sends it again with the same id
        (the owner answers a repeated id with the answer it already gave)."""
        request_id = str(uuid.uuid4())
        frames = [request_id.encode(), method.encode(), json.dumps(body, sort_keys=True).encode()]
        for _ in range(attempts):
            socket = self.context.socket(zmq.DEALER)
            socket.setsockopt(zmq.LINGER, 0)
            socket.connect(self.endpoint(endpoint))
            socket.send_multipart(frames)
            try:
                if socket.poll(int(timeout * 1000)):
                    reply = socket.recv_multipart()
                    if len(reply) != 3 or reply[0].decode() != request_id:
                        raise RuntimeError(f"{endpoint} answered with a malformed reply")
                    if reply[1] != b"ok":
                        # {"code", "message"} (docs/BUS.md, "Errors").
                        try:
                            error = json.loads(reply[2])
                            words = f"{error['message']} ({error['code']})"
                        except (ValueError, KeyError, TypeError):
                            words = reply[2].decode(errors="replace")
                        raise RuntimeError(f"{endpoint} {method}: {words}")
                    answer = json.loads(reply[2])
                    self.check(answer, reply_definition, f"reply to {method}")
                    return answer
            finally:
                socket.close()
        raise BusUnavailable(f"{endpoint} did not answer {method} ({attempts} attempts)")


class Chat:
    """The conversation as plain lines, and what is sent."""

    def __init__(self, bus):
        self.bus = bus
        self.instance = str(uuid.uuid4())
        self.revision = 0
        self.bot = "Bot"
        self.last_presence = 0.0
        self.connection = None

    def announce(self, state="active"):
        self.bus.publish("frontend.presence",
                         {"frontEnd": FRONT_END, "instance": self.instance, "pid": os.getpid(), "state": state})
        self.last_presence = time.monotonic()

    def start(self, show_transcript=True):
        self.bus.subscribe(["conv.", "conn.state", "bot.state"])
        self.announce()
        snapshot = self.bus.request("snapd.cmd", "snapshot", {"frontEnd": FRONT_END, "limit": 20}, "SnapshotReply")
        self.revision = snapshot["transcript"]["revision"]
        if show_transcript:
            for entry in snapshot["transcript"]["entries"]:
                self.show_entry(entry)

    def send(self, text):
        message_id = str(uuid.uuid4())
        body = {"id": {"value": message_id}, "content": text}
        self.bus.check(body, "SendRequest", "send request")
        reply = self.bus.request("protod.cmd", "send", body, "SendReply")
        return message_id, reply

    def show_entry(self, entry):
        tool = entry.get("tool")
        if tool:  # a tool call the bot made, not words of its own: shown again as it goes on
            print(f"  [tool] {entry['content']} · {tool.get('state', '?')}", flush=True)
            return
        sender = entry["sender"]
        name = (entry.get("author") or "you") if sender["type"] == "user" else sender.get("name") or self.bot
        mark = "" if entry["status"] in ("received", "delivered") else f"  ({entry['status']})"
        print(f"{name}> {entry['content']}{mark}", flush=True)

    def handle(self, topic, body):
        """Prints a live change; returns the body when it is a conversation change."""
        if body.get("revision") is not None and body["revision"] <= self.revision:
            return None  # the snapshot had it
        if topic == "conv.message":
            if body["sender"]["type"] == "bot":
                self.bot = body["sender"].get("name") or self.bot
            self.show_entry(body)
        elif topic == "conv.delivery" and body["status"] != "queued":  # the entry said so already
            detail = f": {body['detail']}" if body.get("detail") else ""
            print(f"  message {body['status']}{detail}", flush=True)
        elif topic == "conn.state":
            if body["phase"] != self.connection:
                self.connection = body["phase"]
                print(f"[{body['words']}]", flush=True)
        elif topic == "bot.state":
            self.bot = body["botName"]
            if body["state"] == "thinking":
                print(f"  {self.bot} is thinking…", flush=True)
        return body

    def keep_present(self):
        if time.monotonic() - self.last_presence >= 1.0:
            self.announce()


def send_once(chat, text, timeout):
    message_id, reply = chat.send(text)
    if not reply["accepted"]:
        print(f"not accepted: {reply['status']}", file=sys.stderr)
        return 1
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        chat.keep_present()
        message = chat.bus.receive(200)
        if message is None:
            continue
        topic, _, body = message
        if topic == "conv.message" and (body.get("inReplyTo") or {}).get("value") == message_id:
            print(body["content"], flush=True)
            return 0
        if topic == "conv.delivery" and body["id"]["value"] == message_id and body["status"] in ("failed", "expired", "cancelled", "lost"):
            print(f"the message {body['status']}: {body.get('detail', '')}", file=sys.stderr)
            return 1
    print(f"no reply within {timeout} s", file=sys.stderr)
    return 2


class Inbox:
    """A named pipe whose lines are sent: how a front end under compose is given input."""

    def __init__(self, path):
        if not os.path.exists(path):
            os.mkfifo(path, 0o600)
        if not stat.S_ISFIFO(os.stat(path).st_mode):
            raise SystemExit(f"{path} is not a named pipe")
        self.fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        # Held open so the pipe does not read as ended when a writer closes it.
        self.keeper = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        self.buffer = b""

    def lines(self):
        try:
            self.buffer += os.read(self.fd, 65536)
        except BlockingIOError:
            pass
        *complete, self.buffer = self.buffer.split(b"\n")
        return [line.decode(errors="replace").strip() for line in complete if line.strip()]


def chat_loop(chat, inbox):
    poller = zmq.Poller()
    poller.register(chat.bus.subscriber, zmq.POLLIN)
    reading_stdin = True
    poller.register(sys.stdin, zmq.POLLIN)
    if inbox:
        poller.register(inbox.fd, zmq.POLLIN)
    while True:
        chat.keep_present()
        ready = dict(poller.poll(250))
        while True:
            message = chat.bus.receive(0)
            if message is None:
                break
            chat.handle(message[0], message[2])
        lines = []
        if reading_stdin and ready.get(sys.stdin.fileno()):
            line = sys.stdin.readline()
            if line == "":
                reading_stdin = False  # stdin ended (under compose it is /dev/null): keep following
                poller.unregister(sys.stdin)
            elif line.strip():
                lines.append(line.strip())
        if inbox and ready.get(inbox.fd):
            lines += inbox.lines()
        for text in lines:
            _, reply = chat.send(text)
            if not reply["accepted"]:
                print(f"  not accepted: {reply['status']}", flush=True)


def main():
    parser = argparse.ArgumentParser(description="Chat with the Tether bot through the bus, from Python.")
    parser.add_argument("--run-dir", help="the run directory (default: $TETHER_RUN, else $XDG_RUNTIME_DIR/tether, else /tmp/tether-$UID)")
    parser.add_argument("--send", metavar="TEXT", help="send one message, print the reply and exit")
    parser.add_argument("--timeout", type=float, default=30, help="with --send: seconds to wait for the reply")
    parser.add_argument("--inbox", metavar="FIFO", help="also send every line written to this named pipe (created 0600)")
    parser.add_argument("--schema", default=DEFAULT_SCHEMA, help="the bus schema to check messages against")
    parser.add_argument("--strict", action="store_true", help="stop (exit 3) at the first message that does not match the schema")
    arguments = parser.parse_args()

    chat = Chat(Bus(run_directory(arguments.run_dir), Schema(arguments.schema), arguments.strict))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    status = 0
    try:
        chat.start(show_transcript=arguments.send is None)
        if arguments.send is not None:
            status = send_once(chat, arguments.send, arguments.timeout)
        else:
            chat_loop(chat, Inbox(arguments.inbox) if arguments.inbox else None)
    except BusUnavailable as error:
        print(f"tether_chat: {error}", file=sys.stderr)
        status = 4
    except SchemaViolation:
        status = 3
    except RuntimeError as error:
        print(f"tether_chat: {error}", file=sys.stderr)
        status = 1
    except KeyboardInterrupt:
        status = 0
    finally:
        chat.announce("leaving")
        chat.bus.publisher.close()
        chat.bus.subscriber.close()
        chat.bus.context.term()
    sys.exit(status)


if __name__ == "__main__":
    main()
