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
  // Updates are applied once per frame, the latest of each section only: a busy stream costs
  // one pass over the page per frame, however many messages came in it.
  const due = new Map();
  let scheduled = 0;
  source.addEventListener("update", (message) => {
    for (const fragment of JSON.parse(message.data).fragments) due.set(fragment.id, fragment);
    document.body.dataset.version = message.lastEventId;
    if (!scheduled) scheduled = requestAnimationFrame(apply);
  });

  function apply() {
    scheduled = 0;
    const fragments = [...due.values()];
    due.clear();
    const unsorted = new Set();
    for (const fragment of fragments) place(fragment, unsorted);
    for (const container of unsorted) sort(container);
  }

  // Replace the element `id` with `html`; add it to `parent` if it is new; remove it if `html`
  // is empty. A parent that got a child, or one whose place changed, goes into `unsorted`.
  function place({ id, html, parent }, unsorted) {
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
    if (container && (!old || old.dataset.sort !== node.dataset.sort)) unsorted.add(container);
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
      const said = ago(now - Number(time.dataset.at));
      if (time.textContent !== said) time.textContent = said;
    }
  }

  tick();
  setInterval(tick, 1000);
})();
