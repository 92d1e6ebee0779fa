// The pages' live updates (worker/dashboard/server.py): the page's own URL as an event stream,
// from the board version the page was rendered at; each update names sections to swap in.
// Sections arrive as HTML the server escaped; nothing here builds markup from data.
"use strict";

(() => {
  const live = document.getElementById("live");
  const url = new URL(window.location.href);
  url.searchParams.delete("format");
  url.searchParams.set("since", document.body.dataset.version);
  const source = new EventSource(url);

  source.addEventListener("open", () => {
    live.textContent = "live";
    live.className = "live on";
  });
  source.addEventListener("error", () => {
    live.textContent = "reconnecting…";
    live.className = "live off";
  });
  source.addEventListener("update", (message) => {
    for (const fragment of JSON.parse(message.data).fragments) place(fragment);
    tick();
    document.body.dataset.version = message.lastEventId;
  });

  // Replace the element `id` with `html`; add it to `parent` if it is new; remove it if `html` is empty.
  function place({ id, html, parent }) {
    const old = document.getElementById(id);
    if (!html) {
      if (old) old.remove();
      return;
    }
    const holder = document.createElement("template");
    holder.innerHTML = html;
    const node = holder.content.firstElementChild;
    const container = parent ? document.getElementById(parent) : null;
    if (old) old.replaceWith(node);
    else if (container) container.append(node);
    if (container) sort(container);
  }

  // Children in `data-sort` order (code point order, as the server sorts them).
  function sort(container) {
    const items = [...container.children];
    const key = (node) => node.dataset.sort || "";
    const sorted = [...items].sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
    if (sorted.some((node, index) => node !== items[index])) container.append(...sorted);
  }

  // The same words as worker/dashboard/formats.py `ago`.
  function ago(milliseconds) {
    const seconds = Math.max(0, Math.floor(milliseconds / 1000));
    if (seconds < 2) return "just now";
    for (const [unit, size] of [["d", 86400], ["h", 3600], ["m", 60]]) {
      if (seconds >= size) return `${Math.floor(seconds / size)} ${unit} ago`;
    }
    return `${seconds} s ago`;
  }

  function tick() {
    const now = Date.now();
    for (const time of document.querySelectorAll("time[data-at]")) {
      time.textContent = ago(now - Number(time.dataset.at));
    }
  }

  tick();
  setInterval(tick, 1000);
})();
