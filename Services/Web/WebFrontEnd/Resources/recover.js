// The page tether-web answers when the browser asks for Tether's page without its cookie
// (another program of this host may have pushed it out of the browser's cookie jar): the key
// the page keeps in this origin's storage, which no other port can reach, is traded for the
// cookie, and the page is loaded again. Without a key the words say what to do; when the
// trade does not bring the page, they show and it is tried again every ten seconds (never in
// a loop of reloads, for a browser that keeps no cookies).
"use strict";

const KEY = "tether-page-key";
const TRIED = "tether-page-key-tried";
const pagePath = document.documentElement.dataset.pagePath;
const words = document.getElementById("words");

function stored(storage, name) {
  try { return storage.getItem(name); } catch (_) { return null; }
}

function tradeKey(key) {
  try { sessionStorage.setItem(TRIED, String(Date.now())); } catch (_) { /* tried once more, at worst */ }
  fetch(pagePath + "/key", { method: "POST", headers: { "X-Tether-Page-Key": key }, credentials: "same-origin", cache: "no-store" })
    .then((answer) => { if (answer.ok) location.reload(); else words.hidden = false; }, () => { words.hidden = false; });
}

const key = stored(localStorage, KEY);
if (!key) {
  words.hidden = false;
} else {
  const wait = 10000 - (Date.now() - Number(stored(sessionStorage, TRIED) || 0));
  if (wait > 0) words.hidden = false;
  setTimeout(() => tradeKey(key), Math.max(0, wait));
}
