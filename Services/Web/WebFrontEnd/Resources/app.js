// Tether's web page: the conversation from the first frame in the HTML, then live through
// tether-web's WebSocket, which speaks the bus schema (docs/BUS.md, docs/WEB.md).
// Plain JavaScript, no build step. Nothing typed is lost: a message gets its id here, waits in
// localStorage until tether-web has handed it to protod, and is sent again with the same id
// (never twice: protod keeps one message per id) after any reconnect.
"use strict";

const frame = JSON.parse(document.getElementById("first-frame").textContent);
const list = document.getElementById("conversation");
const banner = document.getElementById("banner");
const bannerWords = document.getElementById("banner-words");
const reconnectButton = document.getElementById("reconnect");
const networkNews = document.getElementById("network-news");
const notice = document.getElementById("notice");
const form = document.getElementById("composer");
const input = document.getElementById("message");
const statusFields = {
  connection: document.getElementById("status-connection"),
  network: document.getElementById("status-network"),
  outbox: document.getElementById("status-outbox"),
  health: document.getElementById("status-health"),
  session: document.getElementById("status-session"),
};

const PENDING_KEY = "tether-pending";
/** Entries by id, in the order they first came. */
const entries = new Map();
/** Replies still streaming, by id: each its latest progress, with the whole reply so far in `content`. */
const streams = new Map();
const utf8 = new TextEncoder();

/**
 * A conv.stream progress applied to what the page has of the reply: the reply so far, or
 * null when it does not fit and the page keeps what it has (an older progress; a chunk whose
 * offset is not the end of the reply here, because one was missed: the next progress that
 * carries the whole reply, or the reply's conv.message, repairs it).
 */
function follow(previous, progress) {
  if (previous && previous.chunkIndex > progress.chunkIndex) return null;
  if (typeof progress.content === "string") return Object.assign({}, progress, { length: utf8.encode(progress.content).length });
  if (!previous || previous.length !== progress.offset) return null;
  return Object.assign({}, progress, {
    content: previous.content + progress.chunk,
    length: previous.length + utf8.encode(progress.chunk).length,
  });
}
let revision = frame.revision || 0;
/** The session whose transcript is shown (OpenClaw); null: every entry. */
let shownSession = frame.session || null;
/** After a switch, the session where messages sent before it are still answered: its entries show too, marked. */
let finishingSession = null;
let botName = "Bot";
let socket = null;
let socketDelay = 500;
let lastPhase = null;
let hadConnection = false;
let lastNetwork = null;
let draftTimer = null;

function pending() {
  try { return JSON.parse(localStorage.getItem(PENDING_KEY) || "[]"); } catch (_) { return []; }
}
function setPending(messages) { localStorage.setItem(PENDING_KEY, JSON.stringify(messages)); }

const MARKS = { queued: "… queued", sent: "✓ sent", accepted: "✓ accepted, waiting in the gateway's queue", delivered: "✓✓ delivered", failed: "✗ failed", expired: "✗ expired",
  cancelled: "✗ cancelled", sending: "… sending" };

function render() {
  list.textContent = "";
  if (entries.size === 0 && streams.size === 0) {
    const empty = document.createElement("li");
    empty.className = "empty";
    empty.textContent = "No messages yet. Type one and press Enter.";
    list.appendChild(empty);
    return;
  }
  for (const entry of entries.values()) list.appendChild(item(entry, false));
  for (const progress of streams.values()) {
    if (!entries.has(progress.id.value)) {
      list.appendChild(item({ id: progress.id, sender: { type: "bot" }, content: progress.content, inReplyTo: progress.inReplyTo, session: progress.session }, true));
    }
  }
}

function item(entry, streaming) {
  const li = document.createElement("li");
  const other = entry.sender && entry.sender.type === "user" && entry.author;
  const mine = entry.sender && entry.sender.type === "user" && !other;
  li.className = mine ? "user" : other ? "other" : "bot";
  li.dataset.id = entry.id.value;
  if (entry.inReplyTo) li.dataset.replyTo = entry.inReplyTo.value;
  const who = document.createElement("span");
  who.className = "who";
  who.textContent = (entry.session && shownSession && entry.session !== shownSession ? "[" + entry.session + "] " : "")
    + (mine ? "You:" : other ? entry.author + ":" : (entry.sender.name || botName) + ":");
  const text = document.createElement("span");
  text.className = "text" + (streaming ? " streaming" : "");
  text.textContent = entry.content;
  li.append(who, " ", text);
  if (mine || entry.status === "incomplete") {
    li.append(" ");
    const mark = document.createElement("span");
    const status = entry.status || "sending";
    mark.className = "mark" + (["failed", "expired", "cancelled", "incomplete"].includes(status) ? " bad" : "");
    mark.textContent = status === "incomplete" ? "✗ cut off" + (entry.detail ? ": " + entry.detail : "") : (MARKS[status] || status);
    if (entry.detail && mine && status !== "delivered") mark.title = entry.detail;
    li.appendChild(mark);
  }
  return li;
}

const RANK = { sending: 0, queued: 1, sent: 2, accepted: 2.5, delivered: 3, received: 3, failed: 4, expired: 4, cancelled: 4, incomplete: 4 };

function applyEntry(entry) {
  if (entry.revision && entry.revision <= revision && entries.has(entry.id.value)) return;
  const known = entries.get(entry.id.value);
  if (known && (RANK[entry.status] ?? 0) < (RANK[known.status] ?? 0) && entry.sender.type === "user") return;
  entries.set(entry.id.value, Object.assign({}, known || {}, entry));
  if (entry.sender.type !== "user") streams.delete(entry.id.value);
  if (entry.sender.type === "bot" && entry.sender.name) botName = entry.sender.name;
}

function applyDelivery(update) {
  const known = entries.get(update.id.value);
  if (!known) return;
  if ((RANK[update.status] ?? 0) < (RANK[known.status] ?? 0)) return;
  known.status = update.status;
  known.detail = update.detail;
}

/** Whether an entry or reply of `session` is shown: the transcript's, or of the session finishing. */
function isShown(session) {
  return !session || !shownSession || session === shownSession || session === finishingSession;
}

/** The conversation moved to another session: its transcript replaces the one shown. */
function showSession(session) {
  statusFields.session.textContent = (session.sessionKey || "the gateway's only one")
    + (session.finishing ? " (" + session.finishingMessages + " sent before still finishing in " + session.finishing + ")" : "");
  finishingSession = session.finishing || null;
  if (!session.sessionKey || session.sessionKey === shownSession) return;
  shownSession = session.sessionKey;
  for (const [id, entry] of entries) if (entry.status !== "sending") entries.delete(id);
  streams.clear();
  revision = 0;
  notice.textContent = "Now chatting in " + shownSession + ".";
  render();
  if (socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify({ type: "snapshot", session: shownSession }));
}

function applySnapshot(snapshot) {
  if (snapshot.session && shownSession && snapshot.session !== shownSession) return;
  for (const entry of snapshot.entries) applyEntry(entry);
  revision = Math.max(revision, snapshot.revision || 0);
  for (const progress of snapshot.streaming || []) {
    const followed = follow(null, progress);
    if (followed) streams.set(progress.id.value, followed);
  }
}

function showConnection(status) {
  const phase = status.phase;
  statusFields.connection.textContent = status.words;
  let tone = null;
  let words = status.words;
  if (phase === "connected") {
    if (hadConnection && lastPhase && lastPhase !== "connected") { tone = "good"; words = "Reconnected"; }
    hadConnection = true;
  } else if (phase === "failed") {
    tone = "problem";
  } else if (phase !== "suspended" || lastPhase !== null) {
    tone = phase === "suspended" ? null : "waiting";
  }
  lastPhase = phase;
  showBanner(tone, words, phase === "failed" || phase === "waitingForNetwork" || phase === "reconnecting");
}

function showBanner(tone, words, offerReconnect) {
  if (!tone) { banner.hidden = true; return; }
  banner.hidden = false;
  banner.className = "banner " + tone;
  bannerWords.textContent = words;
  reconnectButton.hidden = !offerReconnect;
  if (tone === "good") setTimeout(() => { if (bannerWords.textContent === "Reconnected") banner.hidden = true; }, 3000);
}

function showNetwork(path) {
  const words = path.satisfied ? "available through " + (path.interface || "an interface") + " (" + (path.kind || "other") + ")" : "none";
  statusFields.network.textContent = words;
  if (lastNetwork !== null && (lastNetwork.satisfied !== path.satisfied || lastNetwork.interface !== path.interface)) {
    networkNews.textContent = "Network: " + words + ".";
  }
  lastNetwork = path;
}

function receive(data) {
  const message = JSON.parse(data);
  switch (message.type) {
    case "snapshot":
      applySnapshot(message.snapshot);
      render();
      break;
    case "bus":
      applyBus(message.topic, message.body);
      break;
    case "sendResult":
      setPending(pending().filter((waiting) => waiting.id !== message.id));
      if (message.warning) notice.textContent = "Note: " + message.warning;
      break;
    case "sendError":
      if (message.code === "unavailable") break; // kept, sent again on the next connection
      setPending(pending().filter((waiting) => waiting.id !== message.id));
      entries.set(message.id, Object.assign(entries.get(message.id) || { id: { value: message.id }, sender: { type: "user" }, content: "" },
        { status: "failed", detail: "not sent: " + message.message }));
      notice.textContent = "Not sent: " + message.message;
      render();
      break;
    case "problem":
      notice.textContent = message.message;
      break;
  }
}

function applyBus(topic, body) {
  switch (topic) {
    case "conv.message": if (!isShown(body.session)) break; applyEntry(body); if (body.revision) revision = Math.max(revision, body.revision); render(); break;
    case "conv.delivery": applyDelivery(body); if (body.revision) revision = Math.max(revision, body.revision); render(); break;
    case "conv.session": showSession(body); break;
    case "conv.stream": {
      if (entries.has(body.id.value) || !isShown(body.session)) break;
      const followed = follow(streams.get(body.id.value), body);
      if (followed) { streams.set(body.id.value, followed); render(); }
      break;
    }
    case "conn.state": showConnection(body); break;
    case "net.path": showNetwork(body); break;
    case "bot.state": botName = body.botName || botName; break;
    case "outbox.summary": statusFields.outbox.textContent = body.pending + " waiting to be delivered"; break;
    case "health": statusFields.health.textContent = body.state; break;
    case "storage":
      if (body.state === "full" || (body.replaced || []).length) {
        notice.textContent = "Storage: " + (body.words || body.replaced.map((file) => file.words).join(" "));
      }
      break;
  }
}

function connect() {
  socket = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/ws");
  socket.onopen = () => {
    socketDelay = 500;
    if (!banner.hidden && bannerWords.textContent === "Reconnecting to tether-web…") banner.hidden = true;
    socket.send(JSON.stringify({ type: "snapshot", session: shownSession }));
    // What was typed while tether-web could not be reached is saved now.
    socket.send(JSON.stringify({ type: "draft", text: input.value }));
    for (const waiting of pending()) socket.send(JSON.stringify({ type: "send", id: waiting.id, content: waiting.content }));
  };
  socket.onmessage = (event) => receive(event.data);
  socket.onclose = () => {
    showBanner("waiting", "Reconnecting to tether-web…", false);
    setTimeout(connect, socketDelay);
    socketDelay = Math.min(socketDelay * 2, 5000);
  };
}

function send(content) {
  const id = crypto.randomUUID();
  setPending(pending().concat([{ id, content }]));
  entries.set(id, { id: { value: id }, sender: { type: "user" }, content, status: "sending" });
  render();
  if (socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify({ type: "send", id, content }));
}

function saveDraft() {
  clearTimeout(draftTimer);
  draftTimer = setTimeout(() => {
    if (socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify({ type: "draft", text: input.value }));
  }, 600);
}

form.addEventListener("submit", (event) => {
  event.preventDefault();
  const content = input.value;
  if (!content.trim()) { notice.textContent = "The message is empty."; return; }
  notice.textContent = "";
  input.value = "";
  send(content);
  saveDraft();
});
input.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey) { event.preventDefault(); form.requestSubmit(); }
});
input.addEventListener("input", saveDraft);
reconnectButton.addEventListener("click", () => {
  if (socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify({ type: "reconnect" }));
});

applySnapshot(frame);
for (const waiting of pending()) {
  if (!entries.has(waiting.id)) entries.set(waiting.id, { id: { value: waiting.id }, sender: { type: "user" }, content: waiting.content, status: "sending" });
}
if (frame.draft && !input.value) input.value = frame.draft;
if (frame.connection) showConnection(frame.connection);
render();
connect();
