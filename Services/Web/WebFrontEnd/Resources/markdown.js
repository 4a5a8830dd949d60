// A bot's reply, written in Markdown, made into DOM nodes for Tether's web page. Every
// character of the reply ends up in a text node: raw HTML in a reply is shown as the text it
// is, never parsed. Links are made only for http, https and mailto addresses, and open
// apart from the page (rel="noopener noreferrer"); an image is shown as a link to it, never
// loaded. What is read: paragraphs (a line break is a break), ATX headings, fenced code (one
// still open, as in a reply that is streaming, runs to the end), block quotes, lists,
// pipe tables, thematic breaks; code spans, emphasis, strong, strikethrough, links,
// autolinks and bare http(s) addresses, backslash escapes. Nesting deeper than
// MAX_DEPTH is shown as text, and no search for a closing mark is made twice from the same
// place, so that no reply, however written, takes long.
"use strict";

const TetherMarkdown = (() => {
  const MAX_DEPTH = 12;
  const SCHEMES = new Set(["http:", "https:", "mailto:"]);

  /** The reply `source` as a fragment of DOM nodes. */
  function render(source) {
    const fragment = document.createDocumentFragment();
    blocks(String(source).replace(/\r\n?/g, "\n").split("\n"), fragment, 0);
    return fragment;
  }

  function element(name, className) {
    const node = document.createElement(name);
    if (className) node.className = className;
    return node;
  }

  const blank = (line) => /^[ \t]*$/.test(line);
  const fenceOpening = (line) => /^ {0,3}(`{3,}|~{3,})[ \t]*([^`\n]*)$/.exec(line);
  const heading = (line) => /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/.exec(line);
  const thematicBreak = (line) => /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/.test(line);
  const quoteLine = (line) => /^ {0,3}>/.test(line);

  /** A list item's marker: its indent, the marker, where its content starts, the content. */
  function listMarker(line) {
    const match = /^( {0,12})([-*+]|\d{1,9}[.)])(?:([ \t]+)(.*))?$/.exec(line);
    if (!match) return null;
    const spaces = match[3] ? Math.min(match[3].length, 4) : 1;
    return { indent: match[1].length, marker: match[2], ordered: /\d/.test(match[2]), contentIndent: match[1].length + match[2].length + spaces, content: match[4] || "" };
  }
  const listKind = (marker) => (marker.ordered ? marker.marker.slice(-1) : marker.marker);

  function delimiterRow(line) {
    return line.includes("-") && /^[ \t]*\|?[ \t]*:?-+:?[ \t]*(\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$/.test(line);
  }

  /** A table row's cells: pipes apart the cells, `\|` is a pipe in one. */
  function cells(line) {
    let row = line.trim();
    if (row.startsWith("|")) row = row.slice(1);
    if (row.endsWith("|") && !row.endsWith("\\|")) row = row.slice(0, -1);
    const found = [];
    let cell = "";
    for (let index = 0; index < row.length; index++) {
      if (row[index] === "\\" && row[index + 1] === "|") { cell += "|"; index++; }
      else if (row[index] === "|") { found.push(cell.trim()); cell = ""; }
      else cell += row[index];
    }
    found.push(cell.trim());
    return found;
  }

  function startsTable(lines, index) {
    return lines[index].includes("|") && index + 1 < lines.length && delimiterRow(lines[index + 1])
      && cells(lines[index]).length === cells(lines[index + 1]).length;
  }

  /** Whether the line at `index` starts a block other than a paragraph (and so ends one). */
  function startsBlock(lines, index) {
    const line = lines[index];
    return fenceOpening(line) || heading(line) || thematicBreak(line) || quoteLine(line) || listMarker(line) || startsTable(lines, index);
  }

  function blocks(lines, parent, depth) {
    let index = 0;
    while (index < lines.length) {
      const line = lines[index];
      if (blank(line)) { index++; continue; }
      const fence = fenceOpening(line);
      if (fence) {
        const closing = new RegExp("^ {0,3}" + (fence[1][0] === "`" ? "`" : "~") + "{" + fence[1].length + ",}[ \\t]*$");
        const body = [];
        index++;
        while (index < lines.length && !closing.test(lines[index])) body.push(lines[index++]);
        index++;
        parent.append(codeBlock(body.join("\n"), fence[2].trim().split(/[ \t]/)[0]));
        continue;
      }
      const title = heading(line);
      if (title) {
        const level = title[1].length;
        const node = element("h" + Math.min(6, level + 2), "heading level-" + level);
        inlines(title[2] || "", node, depth);
        parent.append(node);
        index++;
        continue;
      }
      if (thematicBreak(line)) { parent.append(element("hr")); index++; continue; }
      if (quoteLine(line)) {
        const inner = [];
        while (index < lines.length && quoteLine(lines[index])) inner.push(lines[index++].replace(/^ {0,3}> ?/, ""));
        const quote = element("blockquote");
        if (depth < MAX_DEPTH) blocks(inner, quote, depth + 1); else quote.append(inner.join("\n"));
        parent.append(quote);
        continue;
      }
      if (startsTable(lines, index)) {
        const header = cells(line);
        const alignments = cells(lines[index + 1]).map((cell) => (cell.startsWith(":") ? (cell.endsWith(":") ? "center" : "left") : cell.endsWith(":") ? "right" : ""));
        index += 2;
        const rows = [];
        while (index < lines.length && !blank(lines[index]) && lines[index].includes("|")) rows.push(cells(lines[index++]));
        parent.append(table(header, alignments, rows, depth));
        continue;
      }
      if (listMarker(line)) { index = list(lines, index, parent, depth); continue; }
      const paragraph = [line.trim()];
      index++;
      while (index < lines.length && !blank(lines[index]) && !startsBlock(lines, index)) paragraph.push(lines[index++].trim());
      // A div, not a p: the text a page copies (innerText) puts blank lines around a p.
      const node = element("div", "paragraph");
      inlines(paragraph.join("\n"), node, depth);
      parent.append(node);
    }
  }

  /** The list starting at `start`: its items, each with the lines indented under it; returns where it ends. */
  function list(lines, start, parent, depth) {
    const first = listMarker(lines[start]);
    const node = element(first.ordered ? "ol" : "ul");
    if (first.ordered) {
      const number = parseInt(first.marker, 10);
      if (number !== 1) node.start = number;
    }
    let index = start;
    while (index < lines.length) {
      const marker = listMarker(lines[index]);
      if (!marker || listKind(marker) !== listKind(first) || marker.indent >= first.contentIndent) break;
      const item = [marker.content];
      index++;
      while (index < lines.length) {
        const line = lines[index];
        if (blank(line)) {
          // A blank line belongs to the item when what follows is indented under it.
          let next = index + 1;
          while (next < lines.length && blank(lines[next])) next++;
          if (next < lines.length && lines[next].search(/\S/) >= marker.contentIndent) { item.push(...lines.slice(index, next)); index = next; continue; }
          break;
        }
        const indent = line.search(/\S/);
        if (indent >= marker.contentIndent) { item.push(line.slice(marker.contentIndent)); index++; continue; }
        if (listMarker(line) || startsBlock(lines, index)) break;
        item.push(line.trim()); // a lazy continuation of the item's paragraph
        index++;
      }
      const entry = element("li");
      if (depth < MAX_DEPTH) blocks(item, entry, depth + 1); else entry.append(item.join("\n"));
      node.append(entry);
      let next = index;
      while (next < lines.length && blank(lines[next])) next++;
      const following = next < lines.length ? listMarker(lines[next]) : null;
      if (!following || listKind(following) !== listKind(first) || following.indent >= first.contentIndent) break;
      index = next;
    }
    parent.append(node);
    return index;
  }

  function table(header, alignments, rows, depth) {
    const wrapper = element("div", "table");
    const node = element("table");
    const head = element("thead");
    const headRow = element("tr");
    header.forEach((words, column) => headRow.append(cell("th", words, alignments[column], depth)));
    head.append(headRow);
    const body = element("tbody");
    for (const row of rows) {
      const line = element("tr");
      for (let column = 0; column < header.length; column++) line.append(cell("td", row[column] || "", alignments[column], depth));
      body.append(line);
    }
    node.append(head, body);
    wrapper.append(node);
    return wrapper;
  }

  function cell(name, words, alignment, depth) {
    const node = element(name);
    if (alignment) node.className = "align-" + alignment;
    inlines(words, node, depth);
    return node;
  }

  function codeBlock(code, language) {
    const wrapper = element("div", "code");
    const bar = element("div", "code-bar");
    const name = element("span", "language");
    const cleanName = language.replace(/[^\w+#.-]/g, "").slice(0, 32);
    name.textContent = cleanName || "code";
    const copy = element("button", "copy");
    copy.type = "button";
    copy.textContent = "Copy";
    copy.setAttribute("aria-label", "Copy the " + (cleanName ? cleanName + " " : "") + "code");
    const pre = element("pre");
    const body = element("code");
    if (cleanName) body.className = "language-" + cleanName;
    body.textContent = code;
    pre.append(body);
    copy.addEventListener("click", () => copyCode(code, copy, body));
    bar.append(name, copy);
    wrapper.append(bar, pre);
    return wrapper;
  }

  /** Copies the code; where the browser allows no clipboard, selects it for the user to copy. */
  async function copyCode(code, button, body) {
    try {
      await navigator.clipboard.writeText(code);
      button.textContent = "Copied";
    } catch (_) {
      const range = document.createRange();
      range.selectNodeContents(body);
      const selection = window.getSelection();
      selection.removeAllRanges();
      selection.addRange(range);
      button.textContent = "Selected: press Ctrl-C";
    }
    setTimeout(() => { button.textContent = "Copy"; }, 2500);
  }

  /** The address a link may open, or null: absolute http, https and mailto addresses only. */
  function safeAddress(destination) {
    const trimmed = destination.trim();
    if (!/^(https?:\/\/|mailto:)/i.test(trimmed)) return null;
    try {
      const url = new URL(trimmed);
      return SCHEMES.has(url.protocol) ? url.href : null;
    } catch (_) {
      return null;
    }
  }

  function link(address, title) {
    const node = element("a");
    node.href = address;
    node.rel = "noopener noreferrer";
    node.target = "_blank";
    if (title) node.title = title;
    return node;
  }

  /** Each `[`'s matching `]` (brackets nested, escapes skipped), by position, found in one pass. */
  function bracketPairs(source) {
    const pairs = new Map();
    const open = [];
    for (let index = 0; index < source.length; index++) {
      const character = source[index];
      if (character === "\\") index++;
      else if (character === "[") open.push(index);
      else if (character === "]" && open.length > 0) pairs.set(open.pop(), index);
    }
    return pairs;
  }

  /** `(destination "title")` at `open`: the destination, the title and the end, or null. */
  function linkTarget(source, open) {
    const match = /^\(\s*(?:<([^<>\n]*)>|((?:[^\s()\\]|\\.|\([^\s()]*\))*))(?:\s+(?:"([^"]*)"|'([^']*)'))?\s*\)/.exec(source.slice(open, open + 4096));
    if (!match) return null;
    return { destination: (match[1] ?? match[2] ?? "").replace(/\\(.)/g, "$1"), title: match[3] ?? match[4] ?? "", end: open + match[0].length };
  }

  function inlines(source, parent, depth, inLink = false) {
    // Where a search for a closing mark found none: a later one from further on finds none either.
    const noCloser = new Map();
    let brackets = null;
    let text = "";
    const flush = () => { if (text) { parent.append(text); text = ""; } };
    let index = 0;
    while (index < source.length) {
      const character = source[index];
      const rest = () => source.slice(index);
      if (character === "\\" && /[!-/:-@[-`{-~]/.test(source[index + 1] || "")) { text += source[index + 1]; index += 2; continue; }
      if (character === "\n") {
        text = text.replace(/[ \t]+$/, "").replace(/\\$/, "");
        flush();
        parent.append(element("br"));
        index++;
        continue;
      }
      if (character === "`") {
        const run = "`".repeat(runLength(source, index));
        const end = closingRun(source, index + run.length, run, noCloser);
        if (end < 0) { text += run; index += run.length; continue; }
        let code = source.slice(index + run.length, end).replace(/\n/g, " ");
        if (code.length > 2 && code.startsWith(" ") && code.endsWith(" ") && code.trim()) code = code.slice(1, -1);
        flush();
        const node = element("code");
        node.textContent = code;
        parent.append(node);
        index = end + run.length;
        continue;
      }
      if ((character === "[" || (character === "!" && source[index + 1] === "[")) && !inLink) {
        const open = character === "!" ? index + 1 : index;
        brackets = brackets || bracketPairs(source);
        const close = brackets.get(open) ?? -1;
        const target = close >= 0 && source[close + 1] === "(" ? linkTarget(source, close + 1) : null;
        if (target) {
          const words = source.slice(open + 1, close);
          const address = safeAddress(target.destination);
          flush();
          const node = address ? link(address, target.title) : element("span", "unsafe-link");
          if (character === "!") node.append("image: " + (words || target.destination));
          else if (depth < MAX_DEPTH) inlines(words, node, depth + 1, true);
          else node.append(words);
          parent.append(node);
          index = target.end;
          continue;
        }
      }
      if (character === "<" && !inLink) {
        const auto = /^<((?:https?:\/\/|mailto:)[^\s<>]*)>/i.exec(rest());
        const address = auto && safeAddress(auto[1]);
        if (address) {
          flush();
          const node = link(address);
          node.append(auto[1]);
          parent.append(node);
          index += auto[0].length;
          continue;
        }
      }
      if ((character === "h" || character === "H") && !inLink && !/[\w/]/.test(source[index - 1] || " ")) {
        const bare = /^https?:\/\/[^\s<>]+/i.exec(rest());
        if (bare) {
          let words = bare[0];
          // Punctuation ending a sentence is not the address's, nor an unmatched closing parenthesis.
          while (/[.,:;!?'"*_~]$/.test(words) || (words.endsWith(")") && (words.match(/\(/g) || []).length < (words.match(/\)/g) || []).length)) words = words.slice(0, -1);
          const address = safeAddress(words);
          if (address) {
            flush();
            const node = link(address);
            node.append(words);
            parent.append(node);
            index += words.length;
            continue;
          }
        }
      }
      if (character === "*" || character === "_" || character === "~") {
        const run = character.repeat(runLength(source, index));
        const before = index > 0 ? source[index - 1] : " ";
        const after = source[index + run.length] || " ";
        const opens = !/\s/.test(after) && !(character === "_" && /[\p{L}\p{N}]/u.test(before));
        const marks = character === "~" ? (run.length === 2 ? ["~~"] : []) : run.length >= 2 ? [character.repeat(2), character] : [character];
        let done = false;
        for (const mark of opens && depth < MAX_DEPTH ? marks : []) {
          let end = closingMark(source, index + mark.length, mark, noCloser);
          if (end < 0) continue;
          // A longer closing run closes with its last marks (`***both***`: strong, then em inside).
          while (source[end + mark.length] === character) end++;
          flush();
          const node = element(mark === "~~" ? "del" : mark.length === 2 ? "strong" : "em");
          inlines(source.slice(index + mark.length, end), node, depth + 1, inLink);
          parent.append(node);
          index = end + mark.length;
          done = true;
          break;
        }
        if (done) continue;
        text += run;
        index += run.length;
        continue;
      }
      text += character;
      index++;
    }
    flush();
  }

  /** How many times the character at `index` repeats from there. */
  function runLength(source, index) {
    let length = 1;
    while (source[index + length] === source[index]) length++;
    return length;
  }

  /** Where the backtick run `run` closes (a run of exactly its length) after `from`, or -1. */
  function closingRun(source, from, run, noCloser) {
    if ((noCloser.get(run) ?? Infinity) <= from) return -1;
    let index = source.indexOf(run, from);
    while (index >= 0) {
      let length = 0;
      while (source[index + length] === "`") length++;
      if (length === run.length) return index;
      index = source.indexOf(run, index + length);
    }
    noCloser.set(run, Math.min(noCloser.get(run) ?? Infinity, from));
    return -1;
  }

  /** Where emphasis `mark` closes after `from` (after something other than a space), or -1. */
  function closingMark(source, from, mark, noCloser) {
    if ((noCloser.get(mark) ?? Infinity) <= from) return -1;
    let index = source.indexOf(mark, from + 1);
    while (index >= 0) {
      const before = source[index - 1];
      const after = source[index + mark.length] || " ";
      const intraword = mark[0] === "_" && /[\p{L}\p{N}]/u.test(after);
      if (!/\s/.test(before) && !intraword && !(mark.length === 1 && after === mark)) return index;
      index = source.indexOf(mark, index + 1);
    }
    noCloser.set(mark, Math.min(noCloser.get(mark) ?? Infinity, from));
    return -1;
  }

  return { render };
})();
