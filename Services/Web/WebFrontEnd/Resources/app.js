// Tether's web page: the conversation from the first frame in the HTML, then live through
// tether-web's WebSocket, which speaks the bus schema (docs/BUS.md, docs/WEB.md).
// Plain JavaScript, no build step. Nothing typed is lost: a message gets its id here, waits in
// localStorage until tether-web has handed it to protod, and is sent again with the same id
// (never twice: protod keeps one message per id) after any reconnect. Nothing the page keeps
// can stop it from working: what is over the limits is refused here in words, before it is
// sent or kept.
"use strict";

const frame = JSON.parse(document.getElementById("first-frame").textContent);
/** Where the page and its WebSocket are served (tether-web's page path). */
const pagePath = document.documentElement.dataset.pagePath || "";
const list = document.getElementById("conversation");
const announcer = document.getElementById("announcer");
const sizeNote = document.getElementById("size-note");
const approvalsRegion = document.getElementById("approvals");
const approvalList = document.getElementById("approval-list");
const approvalNews = document.getElementById("approval-news");
const banner = document.getElementById("banner");
const bannerWords = document.getElementById("banner-words");
const reconnectButton = document.getElementById("reconnect");
const networkNews = document.getElementById("network-news");
const notice = document.getElementById("notice");
/** The programs the supervisor holds back as misconfigured, with what to fix: shown until fixed. */
const heldBack = document.getElementById("held-back");
const form = document.getElementById("composer");
const input = document.getElementById("message");
const attachmentList = document.getElementById("attachments");
const attachButton = document.getElementById("attach");
const fileInput = document.getElementById("attach-file");
const statusFields = {
  connection: document.getElementById("status-connection"),
  network: document.getElementById("status-network"),
  outbox: document.getElementById("status-outbox"),
  health: document.getElementById("status-health"),
  session: document.getElementById("status-session"),
  model: document.getElementById("status-model"),
  usage: document.getElementById("status-usage"),
};
const statusDetails = document.querySelector("details.status");
const commandOutput = document.getElementById("command-output");
const commandTitle = document.getElementById("command-title");
const commandLines = document.getElementById("command-lines");

const PENDING_KEY = "tether-pending";
/** Where the page keeps its key, to get its cookie back without the URL (recover.js reads it too). */
const PAGE_KEY = "tether-page-key";
/** Entries by id, in the order they first came. */
const entries = new Map();
/** Replies still streaming, by id: each its latest progress, with the whole reply so far in `content`. */
const streams = new Map();
const utf8 = new TextEncoder();
/** The sizes tether-web reads and carries (PageLimits); a snapshot brings them again. */
let limits = frame.limits || { messageBytes: 983040, draftBytes: 1044480, frameBytes: 33619968, gatewayOverheadBytes: 512, gatewayAttachmentOverheadBytes: 96, attachmentBytes: 33488896, imageBytes: 5000000 };
/** OpenClaw: the largest frame the gateway reads, from conn.state; null when not known. */
let gatewayPayload = (frame.connection && frame.connection.gateway && frame.connection.gateway.maximumPayload) || null;

function sizeWords(bytes) {
  if (bytes < 1024) return bytes + " bytes";
  if (bytes < 1024 * 1024) return (bytes / 1024).toFixed(bytes < 10240 ? 1 : 0) + " KiB";
  return (bytes / (1024 * 1024)).toFixed(1) + " MiB";
}

/** Why `text` cannot be sent (over tether-web's limit or the gateway's), in words; null when it can. */
function tooLarge(text) {
  const carried = utf8.encode(JSON.stringify(text)).length;
  if (carried > limits.messageBytes) {
    return "The message is " + sizeWords(carried) + "; a message may have at most " + sizeWords(limits.messageBytes) + ". Shorten it or send it in parts.";
  }
  const bytes = utf8.encode(text).length;
  if (gatewayPayload && bytes + limits.gatewayOverheadBytes > gatewayPayload) {
    return "The message is " + sizeWords(bytes) + "; the gateway reads at most " + sizeWords(gatewayPayload - limits.gatewayOverheadBytes)
      + " in a message. Shorten it or send it in parts.";
  }
  return null;
}

/** `12,345`. */
function grouped(number) { return String(number).replace(/\B(?=(\d{3})+(?!\d))/g, ","); }

/** The image type of a file's first bytes (PNG, JPEG, GIF, WebP), as ImageAttachments.sniff tells it; null for anything else. */
function sniff(bytes) {
  const starts = (magic, at = 0) => bytes.length >= at + magic.length && magic.every((byte, index) => bytes[at + index] === byte);
  const ascii = (text) => Array.from(text, (character) => character.charCodeAt(0));
  if (starts([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])) return "image/png";
  if (starts([0xff, 0xd8, 0xff])) return "image/jpeg";
  if (starts(ascii("GIF87a")) || starts(ascii("GIF89a"))) return "image/gif";
  if (starts(ascii("RIFF")) && starts(ascii("WEBP"), 8)) return "image/webp";
  return null;
}

function base64(bytes) {
  let binary = "";
  for (let index = 0; index < bytes.length; index += 0x8000) binary += String.fromCharCode.apply(null, bytes.subarray(index, index + 0x8000));
  return btoa(binary);
}

/** `cat.png (image/png, 12,345 bytes)`. */
function attachmentWords(note) { return note.name + " (" + note.mimeType + ", " + grouped(note.bytes) + " bytes)"; }

/** `[image: cat.png (image/png, 12,345 bytes)]` after a message's text, when it carried images. */
function withAttachments(entry) {
  const notes = entry.attachments || [];
  if (notes.length === 0) return entry.content;
  const words = "[" + (notes.length === 1 ? "image" : "images") + ": " + notes.map(attachmentWords).join("; ") + "]";
  return entry.content ? entry.content + " " + words : words;
}

/** The images attached to the next message: {name, mimeType, content, bytes}. */
let attached = [];

/** Why these images cannot go with `text` (what protod would say), in words; null when they can. */
function attachmentsTooLarge(images, text) {
  if (images.length === 0) return null;
  const total = images.reduce((sum, image) => sum + image.content.length, 0);
  const room = limits.attachmentBytes - 2 * utf8.encode(text).length;
  const decoded = images.reduce((sum, image) => sum + image.bytes, 0);
  if (total > room) {
    return "the image" + (images.length === 1 ? " is " : "s are ") + grouped(decoded) + " bytes; with this text, Tether's bus carries at most "
      + grouped(Math.max(0, Math.floor(room / 4) * 3)) + " bytes of images with one message (the gateway itself would take up to "
      + grouped(limits.imageBytes) + " bytes an image): send a smaller image";
  }
  // OpenClaw: the whole chat.send frame within the gateway's maxPayload, as protod measures it.
  const frameSize = utf8.encode(text).length + limits.gatewayOverheadBytes
    + images.reduce((sum, image) => sum + image.content.length + limits.gatewayAttachmentOverheadBytes + utf8.encode(image.name).length + image.mimeType.length, 0);
  if (gatewayPayload && frameSize > gatewayPayload) {
    return "the message's frame would be about " + grouped(frameSize) + " bytes with its images in base64; the gateway reads frames of at most "
      + grouped(gatewayPayload) + " bytes: send " + (images.length === 1 ? "a smaller image" : "fewer or smaller images");
  }
  return null;
}

/** Reads a file the person chose, pasted or dropped, and attaches it, or says in words why not. */
async function attachFile(file) {
  const name = file.name || "pasted image";
  if (file.size === 0) { notice.textContent = "Not attached: " + name + " is empty: there is no image to send"; return; }
  if (file.size > limits.imageBytes) {
    notice.textContent = "Not attached: " + name + " is " + grouped(file.size) + " bytes; the gateway takes images of at most " + grouped(limits.imageBytes) + " bytes";
    return;
  }
  let bytes;
  try { bytes = new Uint8Array(await file.arrayBuffer()); } catch (_) { notice.textContent = "Not attached: " + name + " cannot be read"; return; }
  const mimeType = sniff(bytes);
  if (!mimeType) {
    notice.textContent = "Not attached: " + name + " is not an image Tether can send: only PNG, JPEG, GIF and WebP are, told by the file's bytes, not its name (the gateway would drop anything else without a word)";
    return;
  }
  const image = { name, mimeType, content: base64(bytes), bytes: bytes.length };
  const words = attachmentsTooLarge(attached.concat([image]), input.value);
  if (words) { notice.textContent = "Not attached: " + words; return; }
  attached.push(image);
  notice.textContent = "";
  showAttached();
}

/** The images waiting for the next message, each with a button that removes it. */
function showAttached() {
  attachmentList.textContent = "";
  attachmentList.hidden = attached.length === 0;
  for (const image of attached) {
    const item = document.createElement("li");
    item.append(attachmentWords(image) + " ");
    const remove = document.createElement("button");
    remove.type = "button";
    remove.textContent = "Remove";
    remove.setAttribute("aria-label", "Remove " + image.name);
    remove.addEventListener("click", () => { attached = attached.filter((other) => other !== image); showAttached(); input.focus(); });
    item.append(remove);
    attachmentList.append(item);
  }
}

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

/** The messages waiting for tether-web, as kept: anything malformed in the storage is left out. */
function pending() {
  let kept;
  try { kept = JSON.parse(localStorage.getItem(PENDING_KEY) || "[]"); } catch (_) { return []; }
  if (!Array.isArray(kept)) return [];
  return kept.filter((waiting) => waiting && typeof waiting.id === "string" && typeof waiting.content === "string"
    && (waiting.attachments === undefined || Array.isArray(waiting.attachments)));
}
/** Keeps the waiting messages; false when the browser's storage refused them (full, or off). */
function setPending(messages) {
  try {
    localStorage.setItem(PENDING_KEY, JSON.stringify(messages));
    return true;
  } catch (_) {
    return false;
  }
}

const MARKS = { queued: "… queued", sent: "✓ sent", accepted: "✓ accepted, waiting in the gateway's queue", delivered: "✓✓ delivered", failed: "✗ failed", expired: "✗ expired",
  cancelled: "✗ cancelled", lost: "✗ lost with a damaged outbox", sending: "… sending" };

/** The items shown, by id, each with the nodes that change in place. */
const shown = new Map();
let emptyItem = null;
/** Ids already announced: each new message is announced once. */
const announced = new Set();
/** Whether the page has drawn its first frame: what comes after is news to announce. */
let drawn = false;

/**
 * Brings the list in line with the entries and the replies streaming, changing only what
 * changed: a new entry adds one item, a growing reply changes its text in place, so a screen
 * reader hears each message once (through the announcer) and not the whole list again.
 */
function render() {
  const wanted = [];
  for (const entry of entries.values()) wanted.push([entry, false]);
  for (const progress of streams.values()) {
    if (!entries.has(progress.id.value)) wanted.push([streamEntry(progress), true]);
  }
  const ids = new Set(wanted.map(([entry]) => entry.id.value));
  for (const [id, view] of shown) if (!ids.has(id)) { view.li.remove(); shown.delete(id); }
  if (wanted.length === 0) {
    if (!emptyItem) {
      emptyItem = document.createElement("li");
      emptyItem.className = "empty";
      emptyItem.textContent = "No messages yet. Type one and press Enter.";
      list.appendChild(emptyItem);
    }
    return;
  }
  if (emptyItem) { emptyItem.remove(); emptyItem = null; }
  let cursor = list.firstElementChild;
  for (const [entry, streaming] of wanted) {
    let view = shown.get(entry.id.value);
    if (!view) { view = makeView(); shown.set(entry.id.value, view); }
    update(view, entry, streaming);
    if (view.li === cursor) cursor = cursor.nextElementSibling;
    else list.insertBefore(view.li, cursor);
    if (drawn && !streaming) announce(entry);
  }
}

/** A reply still streaming, as an entry of the list. */
function streamEntry(progress) {
  return { id: progress.id, sender: { type: "bot" }, content: progress.content, inReplyTo: progress.inReplyTo, session: progress.session };
}

/** An item's nodes; its words are set in place by `update`. */
function makeView() {
  const li = document.createElement("li");
  const who = document.createElement("span");
  who.className = "who";
  const whoWords = document.createTextNode("");
  who.appendChild(whoWords);
  const text = document.createElement("span");
  const textWords = document.createTextNode("");
  text.appendChild(textWords);
  // Between the text and its mark, when there is one (a reply has none: its text ends the item).
  const spacer = document.createTextNode("");
  const mark = document.createElement("span");
  const markWords = document.createTextNode("");
  mark.appendChild(markWords);
  li.append(who, " ", text, spacer, mark);
  return { li, whoWords, text, textWords, spacer, mark, markWords };
}

function setWords(node, words) { if (node.data !== words) node.data = words; }

/**
 * A whole reply's words drawn as Markdown (markdown.js) in place of its text, once. While it
 * streams it grows as text, in place: a screen reader hears it once, and a long reply is not
 * parsed again for every chunk.
 */
function showMarkdown(view, source) {
  if (view.markdownShown === source) return;
  view.text.replaceChildren(TetherMarkdown.render(source));
  view.markdownShown = source;
}

const TOOL_STATES = { running: "running…", ok: "ok", error: "error", unfinished: "no result" };

/** A tool call's line after its ⚙: `read README.md · ok · 0.3 s`. */
function toolWords(tool) {
  const summary = tool.arguments ? tool.name + " " + tool.arguments : tool.name;
  const ms = tool.durationMilliseconds;
  const took = tool.state === "running" || ms == null ? ""
    : " · " + (ms < 10000 ? (ms / 1000).toFixed(1) + " s" : ms < 60000 ? Math.floor(ms / 1000) + " s" : Math.floor(ms / 60000) + " min " + Math.floor(ms / 1000) % 60 + " s");
  return summary + " · " + (TOOL_STATES[tool.state] || tool.state) + took;
}

/**
 * A collapsed <details> of an item, made once and kept in `view[name]`, its words set as text:
 * the model's thinking before the item, or a tool call's output after it. Removed when the
 * entry has no such words.
 */
function setDetails(view, name, summaryWords, words, before) {
  if (words == null || words === "") {
    if (view[name]) { view[name].details.remove(); view[name] = null; }
    return;
  }
  if (!view[name]) {
    const details = document.createElement("details");
    details.className = name;
    const summary = document.createElement("summary");
    summary.textContent = summaryWords;
    const body = document.createElement(name === "output" ? "pre" : "div");
    const bodyWords = document.createTextNode("");
    body.appendChild(bodyWords);
    details.append(summary, body);
    if (before) view.li.insertBefore(details, view.li.firstChild); else view.li.appendChild(details);
    view[name] = { details, bodyWords };
  }
  setWords(view[name].bodyWords, words);
}

function update(view, entry, streaming) {
  const other = entry.sender && entry.sender.type === "user" && entry.author;
  const mine = entry.sender && entry.sender.type === "user" && !other;
  const tool = entry.tool;
  const className = mine ? "user" : other ? "other" : tool ? "bot tool" + (tool.state === "error" || tool.state === "unfinished" ? " bad" : "") : "bot";
  if (view.li.className !== className) view.li.className = className;
  if (view.li.dataset.id !== entry.id.value) view.li.dataset.id = entry.id.value;
  if (entry.inReplyTo && view.li.dataset.replyTo !== entry.inReplyTo.value) view.li.dataset.replyTo = entry.inReplyTo.value;
  setWords(view.whoWords, (entry.session && shownSession && entry.session !== shownSession ? "[" + entry.session + "] " : "")
    + (tool ? "⚙" : mine ? "You:" : other ? entry.author + ":" : (entry.sender.name || botName) + ":"));
  // A bot's reply, once whole, is Markdown; anything else is shown as the text it is.
  const markdown = !tool && !mine && !other && !streaming;
  const textClass = "text" + (markdown ? " markdown" : "") + (streaming ? " streaming" : "");
  if (view.text.className !== textClass) view.text.className = textClass;
  if (markdown) {
    showMarkdown(view, entry.content);
  } else {
    view.markdownShown = null;
    if (view.textWords.parentNode !== view.text) view.text.replaceChildren(view.textWords);
    setWords(view.textWords, tool ? toolWords(tool) : mine ? withAttachments(entry) : entry.content);
  }
  setDetails(view, "thinking", "Thinking", entry.thinking, true);
  setDetails(view, "output", "Output", tool ? tool.output : null, false);
  const status = entry.status || "sending";
  const marked = mine || status === "incomplete";
  if (view.mark.hidden === marked) view.mark.hidden = !marked;
  setWords(view.spacer, marked ? " " : "");
  if (!marked) return;
  const markClass = "mark" + (["failed", "expired", "cancelled", "incomplete", "lost"].includes(status) ? " bad" : "");
  if (view.mark.className !== markClass) view.mark.className = markClass;
  // A message delivered with words of its own (steered into the reply in progress) shows them.
  const delivered = status === "delivered" && entry.detail ? "✓✓ " + entry.detail : null;
  setWords(view.markWords, status === "incomplete" ? "✗ cut off" + (entry.detail ? ": " + entry.detail : "") : (delivered || MARKS[status] || status));
  const title = entry.detail && mine && status !== "delivered" ? entry.detail : "";
  if (view.mark.title !== title) view.mark.title = title;
}

/**
 * Says a new message once, in the announcer's live region: a reply when it is whole,
 * another person's message, and a message of one's own that failed.
 */
function announce(entry) {
  const mine = entry.sender.type === "user" && !entry.author;
  const failed = ["failed", "expired", "cancelled", "lost"].includes(entry.status);
  if (entry.tool) {
    // A tool call is said once, when it ends.
    const key = entry.id.value + ":ended";
    if (entry.tool.state === "running" || announced.has(key)) return;
    announced.add(key);
    const node = announcer.firstChild || announcer.appendChild(document.createTextNode(""));
    node.data = "Tool " + toolWords(entry.tool);
    return;
  }
  const key = entry.id.value + (mine ? ":" + entry.status : "");
  if ((mine && !failed) || announced.has(key)) return;
  announced.add(key);
  const content = entry.content.length > 2000 ? entry.content.slice(0, 2000) + "…" : entry.content;
  let words;
  if (mine && entry.status === "lost") words = "Your message was lost with a damaged outbox: " + (entry.detail || "send it again");
  else if (mine) words = "Your message was not delivered: " + (entry.detail || entry.status);
  else if (entry.sender.type === "user") words = entry.author + " says: " + content;
  else words = (entry.sender.name || botName) + (entry.status === "incomplete" ? ", cut off: " : " says: ") + content;
  // A zero-width space tells two equal messages apart, so the second is announced too.
  const node = announcer.firstChild || announcer.appendChild(document.createTextNode(""));
  node.data = node.data.endsWith(words) ? words + "\u200b" : words;
}

const RANK = { sending: 0, queued: 1, sent: 2, accepted: 2.5, delivered: 3, received: 3, failed: 4, expired: 4, cancelled: 4, incomplete: 4, lost: 4 };

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
  if (socket && socket.readyState === WebSocket.OPEN) transmit("snapshot", { session: shownSession });
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

/** The banner: `about` names what it tells of (the gateway's connection, or "tether-web"). */
function showBanner(tone, words, offerReconnect, about = "gateway") {
  if (!tone) { banner.hidden = true; return; }
  banner.hidden = false;
  banner.dataset.about = about;
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
      if (message.snapshot.limits) limits = message.snapshot.limits;
      applySnapshot(message.snapshot);
      render();
      break;
    case "bus":
      applyBus(message.topic, message.body, message.replay === true);
      break;
    case "sendResult":
      setPending(pending().filter((waiting) => waiting.id !== message.id));
      if (message.warning) notice.textContent = "Note: " + message.warning;
      break;
    case "sendError":
      if (message.code === "unavailable") break; // kept, sent again on the next connection
      fail(message.id, message.message);
      break;
    case "approved":
      approvalNews.textContent = "Approval answered: " + message.words + ".";
      break;
    case "approveError":
      notice.textContent = "The approval was not answered: " + message.message;
      for (const button of approvalList.querySelectorAll("button")) button.disabled = false;
      break;
    case "draftRefused":
      draftRefusedAt = input.value.length;
      showSizeNote("The draft is not saved for other pages: " + message.message);
      break;
    case "command":
      answered(message);
      break;
    case "problem":
      notice.textContent = message.message;
      break;
  }
}

/**
 * A line beginning with "/" is first offered to tether-web, which knows Tether's own commands
 * (SlashCommands): it answers with what to show, or says the line is a message, sent as typed.
 */
function offerCommand(text) {
  const id = crypto.randomUUID();
  transmit("command", { id, text });
}

/** tether-web's answer to a line offered as a command. */
function answered(message) {
  if (!message.handled) {
    if (message.note) notice.textContent = message.note;
    send(message.text, [], message.whileBusy);
    return;
  }
  if (message.show === "status") statusDetails.open = true;
  if (message.words) { notice.textContent = message.words; return; }
  if (!message.lines) return;
  commandTitle.textContent = message.title || "";
  commandLines.textContent = "";
  message.lines.forEach((line, index) => {
    const item = document.createElement("li");
    const place = message.hits && message.hits[index];
    if (place && Number.isInteger(place.position)) {
      // A search hit: a button that shows the message in its conversation.
      const button = document.createElement("button");
      button.type = "button";
      button.className = "hit";
      button.textContent = line;
      button.addEventListener("click", () => showAround(place));
      item.append(button);
    } else {
      item.textContent = line;
    }
    if (index === message.focus) {
      item.className = "focus";
      item.setAttribute("aria-current", "true");
    }
    commandLines.append(item);
  });
  commandOutput.hidden = false;
}

/** Asks tether-web for a stored message with the messages around it; answered like a command. */
function showAround(place) {
  const fields = { id: crypto.randomUUID(), position: place.position };
  if (typeof place.session === "string") fields.session = place.session;
  transmit("around", fields);
}

/** The session's settings and usage (session.settings), in the status view. */
function showSettings(settings) {
  if (settings.unavailable) {
    statusFields.model.textContent = settings.unavailable;
    statusFields.usage.textContent = "not known";
    return;
  }
  const model = settings.model ? (settings.modelProvider ? settings.modelProvider + "/" : "") + settings.model : "unknown";
  statusFields.model.textContent = model + ", thinking " + (settings.thinkingLevel || "the model's default");
  const grouped = (number) => number.toLocaleString("en-US");
  let usage = "no tokens counted yet";
  if (settings.totalTokens != null) {
    usage = grouped(settings.totalTokens) + (settings.contextTokens ? "/" + grouped(settings.contextTokens) : "") + " tokens";
    if (settings.contextTokens) {
      const share = settings.totalTokens * 100 / settings.contextTokens;
      usage += " (" + (share > 0 && share < 0.5 ? "<1" : Math.round(share)) + "% of the context)";
    }
  }
  if (settings.inputTokens != null && settings.outputTokens != null) usage += "; " + grouped(settings.inputTokens) + " in, " + grouped(settings.outputTokens) + " out";
  if (settings.estimatedCostUsd != null) usage += "; $" + settings.estimatedCostUsd.toFixed(4);
  statusFields.usage.textContent = usage;
}

function applyBus(topic, body, replay) {
  switch (topic) {
    case "conv.message": if (!isShown(body.session)) break; applyEntry(body); if (body.revision) revision = Math.max(revision, body.revision); render(); break;
    case "conv.delivery": applyDelivery(body); if (body.revision) revision = Math.max(revision, body.revision); render(); break;
    case "conv.session": showSession(body); break;
    case "conv.stream": {
      if (entries.has(body.id.value) || !isShown(body.session)) break;
      const followed = follow(streams.get(body.id.value), body);
      if (!followed) break;
      streams.set(body.id.value, followed);
      // A reply already shown grows in place: nothing else on the page changes with a chunk.
      const view = shown.get(body.id.value);
      if (view) update(view, streamEntry(followed), true); else render();
      break;
    }
    case "conn.state":
      if (body.gateway && body.gateway.maximumPayload) gatewayPayload = body.gateway.maximumPayload;
      showConnection(body);
      break;
    case "net.path": showNetwork(body); break;
    case "bot.state": botName = body.botName || botName; break;
    case "outbox.summary": statusFields.outbox.textContent = body.pending + " waiting to be delivered"; break;
    case "health": statusFields.health.textContent = body.state; break;
    case "approvals": showApprovals(body, replay); break;
    case "session.settings": showSettings(body); break;
    case "sys.misconfigured": {
      const words = (body.programs || []).map((program) => program.name + " cannot run as configured: " + program.problem + ".").join(" ");
      if (heldBack.textContent !== words) heldBack.textContent = words;
      heldBack.hidden = words === "";
      break;
    }
    case "storage":
      if (body.state === "full" || (body.replaced || []).length) {
        notice.textContent = "Storage: " + (body.words || body.replaced.map((file) => file.words).join(" "));
      }
      break;
  }
}

const DECISION_WORDS = { "allow-once": "Allow once", "allow-always": "Allow always", "deny": "Deny" };
/** The approvals shown, by id: each item is made once and removed when it stops waiting. */
const shownApprovals = new Map();

/**
 * The approvals the gateway waits for (OpenClaw's exec and plugin approvals, kept by protod):
 * one item each, with a button for each decision it allows; a new one and how one ended are
 * said once in a live region.
 */
function showApprovals(update, replay) {
  const waiting = new Set(update.pending.map((approval) => approval.id));
  for (const [id, li] of shownApprovals) if (!waiting.has(id)) { li.remove(); shownApprovals.delete(id); }
  for (const approval of update.pending) {
    if (shownApprovals.has(approval.id)) continue;
    const li = document.createElement("li");
    const what = document.createElement("span");
    what.className = "what";
    if (approval.kind === "exec") {
      what.append("Run ");
      const code = document.createElement("code");
      code.textContent = approval.summary;
      what.append(code, (approval.host ? " on " + approval.host : "") + (approval.workingDirectory ? " in " + approval.workingDirectory : ""));
    } else {
      what.textContent = (approval.severity ? "[" + approval.severity + "] " : "") + approval.summary + (approval.detail ? ": " + approval.detail : "");
    }
    if (approval.agent) what.append(" (agent " + approval.agent + ")");
    if (approval.expiresAt) what.append(", until " + new Date(approval.expiresAt).toLocaleTimeString());
    const decisions = document.createElement("span");
    decisions.className = "decisions";
    for (const decision of approval.allowedDecisions) {
      const button = document.createElement("button");
      button.type = "button";
      button.textContent = DECISION_WORDS[decision] || decision;
      button.dataset.decision = decision;
      button.setAttribute("aria-label", (DECISION_WORDS[decision] || decision) + ": " + approval.summary);
      button.addEventListener("click", () => {
        if (!socket || socket.readyState !== WebSocket.OPEN) { notice.textContent = "Not connected to tether-web: try again when it is back."; return; }
        for (const other of li.querySelectorAll("button")) other.disabled = true;
        transmit("approve", { id: approval.id, decision });
      });
      decisions.appendChild(button);
    }
    li.dataset.id = approval.id;
    li.append(what, decisions);
    approvalList.appendChild(li);
    shownApprovals.set(approval.id, li);
  }
  approvalsRegion.hidden = shownApprovals.size === 0;
  if (replay) return; // old news: what waits is shown above
  if (update.arrived && waiting.has(update.arrived.id)) {
    approvalNews.textContent = "Approval waiting: " + update.arrived.summary + ".";
  } else if (update.ended) {
    approvalNews.textContent = "Approval for " + update.ended.approval.summary + ": " + endedWords(update.ended) + ".";
  }
}

function endedWords(ended) {
  if (ended.how === "expired") return "expired unanswered";
  if (ended.how === "gone") return "no longer waiting";
  const answer = { "allow-once": "allowed once", "allow-always": "allowed always", "deny": "denied" }[ended.decision] || "answered";
  return answer + (ended.by ? " by " + ended.by : "");
}

/** The frames sent on the socket open now, with their sizes: a close for a frame too large names none. */
let sentFrames = [];

function transmit(kind, fields, id) {
  const text = JSON.stringify(Object.assign({ type: kind }, fields));
  sentFrames.push({ kind, id, bytes: utf8.encode(text).length });
  socket.send(text);
}

function connect() {
  socket = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + pagePath + "/ws");
  sentFrames = [];
  let opened = false;
  socket.onopen = () => {
    opened = true;
    socketDelay = 500;
    if (!banner.hidden && banner.dataset.about === "tether-web") banner.hidden = true;
    transmit("snapshot", { session: shownSession });
    reportAttention();
    // What was typed while tether-web could not be reached is saved now.
    saveDraftNow();
    for (const waiting of pending()) transmit("send", sendFields(waiting), waiting.id);
  };
  socket.onmessage = (event) => receive(event.data);
  socket.onclose = (event) => {
    if (event.code === 1009) refuseLargestFrame();
    if (opened) {
      retry();
    } else {
      checkAccess();
    }
  };
}

/**
 * Tells tether-web whether the person looks at this page (visible and focused), so that
 * tether-notify shows a desktop notification only when nobody looks at any front end.
 */
function reportAttention() {
  if (!socket || socket.readyState !== WebSocket.OPEN) return;
  transmit("attention", { focused: document.visibilityState === "visible" && document.hasFocus() });
}
document.addEventListener("visibilitychange", reportAttention);
window.addEventListener("focus", reportAttention);
window.addEventListener("blur", reportAttention);

function retry() {
  showBanner("waiting", "Reconnecting to tether-web…", false, "tether-web");
  setTimeout(connect, socketDelay);
  socketDelay = Math.min(socketDelay * 2, 5000);
}

/**
 * The WebSocket did not open: tether-web is not there (try again), or it refuses this page
 * (its words, as no retry can fix that; tried again slowly, in case the URL `tether web`
 * prints is opened in another tab and gives the browser its key back).
 */
function checkAccess() {
  fetch(pagePath + "/access", { credentials: "same-origin", cache: "no-store" }).then(async (answer) => {
    if (answer.ok) { retry(); return; }
    if (answer.status === 401 && await tradePageKey()) { retry(); return; }
    const words = (await answer.text()).trim();
    showBanner("problem", "tether-web refuses this page: " + words, false, "tether-web");
    setTimeout(connect, 15000);
  }, () => retry());
}

/** Trades the key kept in this origin's storage for the cookie again; whether tether-web took it. */
async function tradePageKey() {
  const key = document.documentElement.dataset.pageKey;
  if (!key) return false;
  try {
    const answer = await fetch(pagePath + "/key", { method: "POST", headers: { "X-Tether-Page-Key": key }, credentials: "same-origin", cache: "no-store" });
    return answer.ok;
  } catch (_) {
    return false;
  }
}

/**
 * tether-web closed the socket for a frame larger than it reads (1009): the largest frame
 * sent on it. A message is marked failed and leaves the storage; a draft stops being saved
 * until it is shorter. Then the page connects again, with nothing left that could close it.
 */
function refuseLargestFrame() {
  const largest = sentFrames.reduce((found, sent) => (found && found.bytes >= sent.bytes ? found : sent), null);
  if (!largest) return;
  const words = "too large for tether-web (" + sizeWords(largest.bytes) + ")";
  if (largest.kind === "send") {
    fail(largest.id, words);
  } else if (largest.kind === "draft") {
    draftRefusedAt = input.value.length;
    showSizeNote("The draft is not saved for other pages: it is " + words + ".");
  }
}

/** A message that will never be sent: marked failed with the words, and no longer kept. */
function fail(id, words) {
  setPending(pending().filter((waiting) => waiting.id !== id));
  entries.set(id, Object.assign(entries.get(id) || { id: { value: id }, sender: { type: "user" }, content: "" },
    { status: "failed", detail: "not sent: " + words }));
  notice.textContent = "Not sent: " + words;
  render();
}

/** A waiting message as the send request carries it: its images without the page's own `bytes`. */
function sendFields(waiting) {
  const fields = { id: waiting.id, content: waiting.content };
  if (waiting.whileBusy) fields.whileBusy = waiting.whileBusy;
  if (waiting.attachments && waiting.attachments.length > 0) {
    fields.attachments = waiting.attachments.map((image) => ({ name: image.name, mimeType: image.mimeType, content: image.content }));
  }
  return fields;
}

/** Sends a message; `whileBusy` ("steer", "interrupt"): what it does if a reply is in progress (/steer, /interrupt). */
function send(content, images, whileBusy) {
  const id = crypto.randomUUID();
  const waiting = { id, content };
  if (images.length > 0) waiting.attachments = images;
  if (whileBusy) waiting.whileBusy = whileBusy;
  if (!setPending(pending().concat([waiting]))) {
    notice.textContent = "The browser's storage is full: this message is kept only while this page is open, until tether-web has it.";
  }
  const notes = images.map((image) => ({ name: image.name, mimeType: image.mimeType, bytes: image.bytes }));
  entries.set(id, { id: { value: id }, sender: { type: "user" }, content, status: "sending", attachments: notes.length > 0 ? notes : undefined });
  render();
  if (socket && socket.readyState === WebSocket.OPEN) transmit("send", sendFields(waiting), id);
}

/** The draft's length when tether-web last refused it: not offered again until it changes. */
let draftRefusedAt = null;
let sizeNoteShown = "";

function showSizeNote(words) {
  if (sizeNoteShown === words) return;
  sizeNoteShown = words;
  sizeNote.textContent = words;
  sizeNote.hidden = !words;
}

/** Whether the text in the composer can be sent, said next to it when it cannot. */
function checkComposer() {
  const words = tooLarge(input.value);
  if (words) showSizeNote(words + " It is not sent and not saved as the draft until it is shorter.");
  else if (draftRefusedAt === null) showSizeNote("");
  return words;
}

function saveDraftNow() {
  clearTimeout(draftTimer);
  if (checkComposer()) return;
  if (draftRefusedAt !== null) {
    if (draftRefusedAt === input.value.length) return;
    draftRefusedAt = null;
    showSizeNote("");
  }
  if (socket && socket.readyState === WebSocket.OPEN) transmit("draft", { text: input.value });
}

function saveDraft() {
  clearTimeout(draftTimer);
  draftTimer = setTimeout(saveDraftNow, 600);
}

form.addEventListener("submit", (event) => {
  event.preventDefault();
  const content = input.value;
  if (!content.trim() && attached.length === 0) { notice.textContent = "The message is empty."; return; }
  const words = tooLarge(content) || attachmentsTooLarge(attached, content);
  if (words) {
    notice.textContent = "Not sent: " + words;
    // The note beside the composer says it at once, not after the draft's saving pause.
    checkComposer();
    return;
  }
  notice.textContent = "";
  commandOutput.hidden = true;
  if (content.trimStart().startsWith("/")) {
    // Tether's own commands need tether-web: without it, the line stays in the composer.
    if (!socket || socket.readyState !== WebSocket.OPEN) {
      notice.textContent = "Lines beginning with / are read by tether-web first, which cannot be reached now: the line is kept, send it again once connected.";
      return;
    }
    input.value = "";
    checkComposer();
    offerCommand(content);
    saveDraft();
    return;
  }
  input.value = "";
  checkComposer();
  send(content, attached);
  attached = [];
  showAttached();
  saveDraft();
});
attachButton.addEventListener("click", () => fileInput.click());
fileInput.addEventListener("change", async () => {
  // The choice is taken and the picker emptied at once: a file chosen while these are still
  // being read starts a choice of its own, and does not bring these back with it.
  const files = Array.from(fileInput.files || []);
  fileInput.value = "";
  for (const file of files) await attachFile(file);
});
input.addEventListener("paste", async (event) => {
  const files = Array.from((event.clipboardData && event.clipboardData.files) || []);
  if (files.length === 0) return;
  event.preventDefault();
  for (const file of files) await attachFile(file);
});
form.addEventListener("dragover", (event) => {
  if (event.dataTransfer && Array.from(event.dataTransfer.types).includes("Files")) event.preventDefault();
});
form.addEventListener("drop", async (event) => {
  const files = Array.from((event.dataTransfer && event.dataTransfer.files) || []);
  if (files.length === 0) return;
  event.preventDefault();
  for (const file of files) await attachFile(file);
});
input.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey) { event.preventDefault(); form.requestSubmit(); }
});
input.addEventListener("input", saveDraft);
reconnectButton.addEventListener("click", () => {
  if (socket && socket.readyState === WebSocket.OPEN) transmit("reconnect", {});
});

// Kept for recover.js: the page answered when this browser has lost its cookie.
try { localStorage.setItem(PAGE_KEY, document.documentElement.dataset.pageKey || ""); } catch (_) { /* without it, the URL `tether web` prints */ }
applySnapshot(frame);
// What this browser kept: messages still waiting, unless they can never be sent.
for (const waiting of pending()) {
  if (!entries.has(waiting.id)) {
    const notes = (waiting.attachments || []).map((image) => ({ name: image.name, mimeType: image.mimeType, bytes: image.bytes }));
    entries.set(waiting.id, { id: { value: waiting.id }, sender: { type: "user" }, content: waiting.content, status: "sending", attachments: notes.length > 0 ? notes : undefined });
  }
  const words = tooLarge(waiting.content);
  if (words) fail(waiting.id, words.replace(/ Shorten it.*/, ""));
}
if (frame.draft && !input.value) input.value = frame.draft;
if (frame.connection) showConnection(frame.connection);
list.textContent = ""; // the HTML's items are drawn again here, to be changed in place from now on
render();
drawn = true;
checkComposer();
connect();
