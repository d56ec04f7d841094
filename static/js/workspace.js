/* Page helpers shared by every area: JSON calls with the CSRF token, and refusals a person can act on. */
(function () {
  function csrfToken() {
    const field = document.querySelector("input[name=csrfmiddlewaretoken]");
    if (field) return field.value;
    const cookie = document.cookie.split("; ").find((part) => part.startsWith("csrftoken="));
    return cookie ? decodeURIComponent(cookie.split("=")[1]) : "";
  }

  /* Sends JSON and always resolves to {response, body}; body is null when the reply has none. */
  async function sendJson(url, method, payload) {
    const response = await fetch(url, {
      method: method,
      credentials: "same-origin",
      headers: {"Content-Type": "application/json", "Accept": "application/json", "X-CSRFToken": csrfToken()},
      body: payload === undefined ? undefined : JSON.stringify(payload),
    });
    const text = await response.text();
    let body = null;
    try { body = text ? JSON.parse(text) : null; } catch (error) { body = {error: "bad_response", detail: text}; }
    return {response: response, body: body};
  }

  /* A refusal as a DOM node: the server's human `detail`, every other limit that binds too
     (`also`), and for a 507 (a quota) a link to the page where the person can free capacity. */
  function refusal(status, body) {
    const box = document.createElement("div");
    box.className = "refusal" + (status === 507 ? " refusal-quota" : "");
    box.setAttribute("role", "alert");
    box.dataset.testid = "refusal";
    const first = (body && (body.detail || body.error)) || ("Request failed (" + status + ").");
    const others = (body && body.also) || [];
    if (others.length) {
      // Several limits bind: one list of them all, the first named first (as items/refusal.html).
      const list = document.createElement("ul");
      list.className = "refusal-also";
      [first, ...others.map((other) => other.detail || other.error)].forEach((line) => {
        const entry = document.createElement("li");
        entry.textContent = line;
        list.appendChild(entry);
      });
      box.appendChild(list);
    } else {
      const text = document.createElement("span");
      text.textContent = first;
      box.appendChild(text);
    }
    if (status === 507) {
      const link = document.createElement("a");
      link.href = document.body.dataset.myResourcesUrl;
      link.textContent = "Free capacity on My resources";
      box.appendChild(document.createTextNode(" "));
      box.appendChild(link);
    }
    return box;
  }

  /* Reads a fetch response of server-sent events, calling onMessage({event, data}) for each as it
     arrives (data is the event's JSON line, parsed). */
  async function readEvents(response, onMessage) {
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let pending = "";
    for (;;) {
      const {value, done} = await reader.read();
      if (done) break;
      pending += decoder.decode(value, {stream: true});
      let end;
      while ((end = pending.indexOf("\n\n")) >= 0) {
        onMessage(parseEvent(pending.slice(0, end)));
        pending = pending.slice(end + 2);
      }
    }
  }

  function parseEvent(frame) {
    const fields = {};
    frame.split("\n").forEach((line) => {
      const at = line.indexOf(": ");
      if (at > 0) fields[line.slice(0, at)] = line.slice(at + 2);
    });
    return {event: fields.event, data: fields.data ? JSON.parse(fields.data) : {}};
  }

  /* The header's menu button (narrow screens): shows and hides the menu, Escape closes it. */
  function foldableMenu() {
    const toggle = document.querySelector(".menu-toggle");
    const menu = document.getElementById("site-menu");
    if (!toggle || !menu) return;
    toggle.hidden = false;
    function setOpen(open) {
      menu.classList.toggle("open", open);
      toggle.setAttribute("aria-expanded", open ? "true" : "false");
    }
    toggle.addEventListener("click", () => setOpen(!menu.classList.contains("open")));
    document.addEventListener("keydown", (event) => {
      if (event.key === "Escape" && menu.classList.contains("open")) { setOpen(false); toggle.focus(); }
    });
  }

  /* A notification's link goes straight to its target, so middle-click, "copy link" and a new tab
     behave as people expect. Following it (a click, Enter, a middle-click) marks it read with a
     POST that outlives the page (keepalive), so a GET never writes. */
  function markReadWhenFollowed() {
    function follow(event) {
      const link = event.target.closest && event.target.closest("a[data-mark-read-url]");
      if (!link || (event.type === "auxclick" && event.button !== 1)) return;
      fetch(link.dataset.markReadUrl, {
        method: "POST",
        keepalive: true,
        credentials: "same-origin",
        headers: {"Accept": "application/json", "X-CSRFToken": csrfToken()},
      }).catch(() => { /* offline: it stays unread, and says so */ });
      link.removeAttribute("data-mark-read-url");
      const row = link.closest(".notification");
      if (row) {
        row.classList.remove("unread");
        row.querySelectorAll(".visually-hidden, .notification-actions").forEach((node) => node.remove());
      }
      const count = document.querySelector("[data-testid=bell-count]");
      if (count) {
        const left = Math.max(0, (parseInt(count.textContent, 10) || 0) - 1);
        count.textContent = left;
        count.closest(".bell").classList.toggle("has-unread", left > 0);
        document.dispatchEvent(new CustomEvent("workspace:unread", {detail: {count: left}}));
      }
    }
    document.addEventListener("click", follow);
    document.addEventListener("auxclick", follow);
  }

  /* The header says which area the page belongs to: the link whose path starts the page's path
     (Home only on itself). */
  function markCurrentArea() {
    const trimmed = (path) => path.replace(/\/+$/, "");
    const here = trimmed(window.location.pathname);
    const home = trimmed((document.body.dataset.rootPath || "") + "/");
    let best = null;
    document.querySelectorAll(".site-nav a").forEach((link) => {
      const path = trimmed(link.pathname);
      const matches = path === here || (path !== home && here.startsWith(path + "/"));
      if (matches && (!best || path.length > trimmed(best.pathname).length)) best = link;
    });
    if (best) best.setAttribute("aria-current", "page");
  }

  /* Any form with `data-confirm` asks its question first; "Cancel" sends nothing. One listener on
     the document serves every page, forms added later included; it listens while the event goes
     down (capture), so it asks before any script that sends the form itself (the terminal's
     Close sandbox), and a "Cancel" reaches none of them. */
  function confirmBeforeSubmit() {
    document.addEventListener("submit", function (event) {
      const question = event.target.dataset && event.target.dataset.confirm;
      if (question && !window.confirm(question)) {
        event.preventDefault();
        event.stopImmediatePropagation();
      }
    }, true);
  }

  /* A refused form comes back as the page it was sent from, with the refusal by the form, but at
     the address it was posted to (`.../files:move`): the address bar shows the page's own
     (its `link rel=canonical`), so copying or reloading it opens the page, not a bare POST path. */
  function showCanonicalAddress() {
    const canonical = document.querySelector("link[rel=canonical]");
    if (!canonical || canonical.href === window.location.href.split("#")[0]) return;
    const target = new URL(canonical.href);
    if (target.origin !== window.location.origin) return;
    window.history.replaceState(window.history.state, "", target.href + window.location.hash);
  }

  /* Every unread count on the page follows the bell: the header's poll dispatches
     `workspace:unread` with the inbox's count. */
  function followUnreadCount() {
    document.addEventListener("workspace:unread", function (event) {
      document.querySelectorAll("[data-unread-count]").forEach((node) => { node.textContent = event.detail.count; });
      document.querySelectorAll("[data-unread-when]").forEach((node) => {
        node.hidden = (node.dataset.unreadWhen === "some") !== (event.detail.count > 0);
      });
    });
  }

  /* The sticky header's height as `--site-header-height` on the root, kept as it wraps or its menu
     opens: what an address's #fragment points at lands below the header (its `scroll-margin-top`),
     however many rows the header takes at this width. */
  function trackHeaderHeight() {
    const header = document.querySelector(".site-header");
    if (!header) return;
    const keep = () => document.documentElement.style.setProperty("--site-header-height", header.offsetHeight + "px");
    keep();
    if (window.ResizeObserver) new ResizeObserver(keep).observe(header);
  }

  /* A `data-copy` button copies the value of the field it names; its status line says what
     happened. Where the clipboard is refused (a plain-http page that is not this machine's), the
     field's text is selected instead, for Ctrl-C. */
  function copyButtons() {
    document.addEventListener("click", function (event) {
      const button = event.target.closest && event.target.closest("button[data-copy]");
      if (!button) return;
      const field = document.getElementById(button.dataset.copy);
      const said = document.querySelector(`[data-copy-said="${button.dataset.copy}"]`);
      if (!field) return;
      const selectInstead = () => {
        field.focus();
        field.select();
        if (said) said.textContent = "Selected: press Ctrl-C (⌘-C) to copy.";
      };
      if (!navigator.clipboard || !window.isSecureContext) { selectInstead(); return; }
      navigator.clipboard.writeText(field.value).then(
        () => { if (said) said.textContent = "Copied."; },
        selectInstead,
      );
    });
  }

  function start() {
    copyButtons(); trackHeaderHeight(); foldableMenu(); markCurrentArea(); markReadWhenFollowed(); confirmBeforeSubmit();
    showCanonicalAddress(); followUnreadCount();
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();

  window.Workspace = {csrfToken: csrfToken, sendJson: sendJson, refusal: refusal, readEvents: readEvents};
})();
