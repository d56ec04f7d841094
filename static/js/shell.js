/* The item page's shells: real terminals (xterm.js, vendored in static/vendor/xterm) on a PTY in
   the item's sandbox, one WebSocket each (docs/ARCHITECTURE.md §11). Several per item, as tabs;
   each says its state (connecting, live, reconnecting, exited with its code). A terminal outlives
   the page: a page load replays what the sandbox kept of it (256 KiB), a dropped connection
   reconnects with backoff and is sent only what it missed (`?since=`), exactly once. An exited
   terminal shows its code and is never started again by a reconnect. Screen-reader mode is on, so
   its text is readable by assistive technology (and by tests). */
(function () {
  const root = document.getElementById("shell");
  if (!root || typeof Terminal === "undefined") return;
  const listUrl = root.dataset.url;
  const tabs = root.querySelector("[data-role=tabs]");
  const screens = root.querySelector("[data-role=screens]");
  const opener = root.querySelector("[data-role=open]");
  const said = root.querySelector("[data-role=said]");
  const encoder = new TextEncoder();
  /* Modes a replayed program may have left on that would turn keys into garbage once it is gone:
     mouse reporting, bracketed paste, application cursor keys and keypad; the cursor shown. */
  const RESET_MODES = "\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[?2004l\x1b[?1l\x1b>\x1b[?25h";
  const shells = new Map();

  opener.addEventListener("click", async function () {
    opener.disabled = true;
    const size = {rows: 24, cols: 80};
    const {response, body} = await Workspace.sendJson(listUrl, "POST", size);
    opener.disabled = false;
    said.replaceChildren();
    if (!response.ok) {
      said.append(Workspace.refusal(response.status, body));
      return;
    }
    show(attach(body));
  });

  load();

  async function load() {
    const response = await fetch(listUrl, {credentials: "same-origin", headers: {Accept: "application/json"}});
    if (!response.ok) return;
    const rows = await response.json();
    rows.forEach(attach);
    if (rows.length) show(shells.get(rows[rows.length - 1].id));
  }

  function attach(row) {
    if (shells.has(row.id)) return shells.get(row.id);
    const number = shells.size + 1;
    const tab = document.createElement("button");
    tab.type = "button";
    tab.className = "ws-shell-tab";
    tab.setAttribute("role", "tab");
    tab.dataset.testid = "shell-tab";
    const label = document.createElement("span");
    label.textContent = "Shell " + number;
    const state = document.createElement("span");
    state.className = "ws-shell-state";
    state.dataset.testid = "shell-state";
    tab.append(label, " ", state);
    const screen = document.createElement("div");
    screen.className = "ws-shell-screen";
    screen.setAttribute("role", "tabpanel");
    screen.setAttribute("aria-label", "Shell " + number);
    screen.dataset.testid = "shell-screen";
    const bar = document.createElement("div");
    bar.className = "ws-shell-bar";
    const close = document.createElement("button");
    close.type = "button";
    close.className = "secondary small";
    close.textContent = "Close shell";
    close.dataset.testid = "shell-close";
    bar.append(close);
    const holder = document.createElement("div");
    holder.className = "ws-shell-term";
    screen.append(bar, holder);
    tabs.append(tab);
    screens.append(screen);
    const term = new Terminal({screenReaderMode: true, cursorBlink: true, convertEol: false, scrollback: 5000,
                               fontFamily: "ui-monospace, SFMono-Regular, Menlo, monospace", fontSize: 14});
    const fit = new FitAddon.FitAddon();
    term.loadAddon(fit);
    term.open(holder);
    const shell = {row: row, tab: tab, state: state, screen: screen, term: term, fit: fit, socket: null,
                   offset: 0, fresh: true, exited: false, closed: false, elsewhere: false, retries: 0, timer: null};
    shells.set(row.id, shell);
    tab.addEventListener("click", function () {
      show(shell);
      if (shell.elsewhere && !shell.socket) {
        shell.elsewhere = false;
        connect(shell);
      }
    });
    close.addEventListener("click", () => closeShell(shell));
    term.attachCustomKeyEventHandler((event) => clipboardKeys(term, event));
    term.onData((data) => send(shell, encoder.encode(data)));
    term.onBinary((data) => send(shell, Uint8Array.from(data, (c) => c.charCodeAt(0))));
    term.onResize(({rows, cols}) => control(shell, {type: "resize", rows: rows, cols: cols}));
    connect(shell);
    return shell;
  }

  /* Copy and paste as Linux terminals do: Ctrl+Shift+C copies the selection, Ctrl+Shift+V pastes;
     Ctrl+C with text selected copies it too (without a selection it is the interrupt, as ever), and
     the browser's own paste (Ctrl+V, the context menu) pastes. Returns whether xterm.js takes the key. */
  function clipboardKeys(term, event) {
    if (event.type !== "keydown" || !event.ctrlKey || event.altKey || event.metaKey) return true;
    const key = event.key.toLowerCase();
    if (key === "c" && (event.shiftKey || term.hasSelection())) {
      if (term.hasSelection()) {
        navigator.clipboard.writeText(term.getSelection()).catch(() => {});
        term.clearSelection();
      }
      event.preventDefault();
      return false;
    }
    if (key === "v" && event.shiftKey) {
      navigator.clipboard.readText().then((text) => term.paste(text)).catch(() => {});
      event.preventDefault();
      return false;
    }
    // Ctrl+V is the browser's paste, not the terminal's ^V: left to the browser, whose paste
    // event xterm.js takes.
    return key !== "v";
  }

  function show(shell) {
    if (!shell) return;
    shells.forEach((other) => {
      other.screen.hidden = other !== shell;
      other.tab.setAttribute("aria-selected", String(other === shell));
    });
    refit(shell);
    shell.term.focus();
  }

  function setState(shell, text, kind) {
    shell.state.textContent = text;
    shell.state.dataset.state = kind;
  }

  function connect(shell) {
    setState(shell, shell.fresh ? "connecting" : "reconnecting", "connecting");
    const url = new URL(shell.row.ws_url);
    url.protocol = location.protocol === "https:" ? "wss:" : "ws:";
    url.host = location.host;
    url.searchParams.set("since", String(shell.offset));
    const socket = new WebSocket(url);
    socket.binaryType = "arraybuffer";
    shell.socket = socket;
    socket.addEventListener("message", function (event) {
      if (typeof event.data !== "string") {
        const bytes = new Uint8Array(event.data);
        shell.offset += bytes.length;
        shell.term.write(bytes);
        return;
      }
      const message = JSON.parse(event.data);
      if (message.type === "replay") {
        if (shell.fresh) shell.term.reset();
        if (message.start > shell.offset && !shell.fresh) {
          shell.term.write("\r\n\x1b[2m[" + (message.start - shell.offset) + " bytes of output were dropped]\x1b[0m\r\n");
        }
        shell.offset = message.start;
      } else if (message.type === "live") {
        shell.offset = message.offset;
        if (shell.fresh) shell.term.write(RESET_MODES);
        shell.fresh = false;
        shell.retries = 0;
        setState(shell, "live", "live");
        refit(shell);
        control(shell, {type: "resize", rows: shell.term.rows, cols: shell.term.cols});
      } else if (message.type === "exit") {
        shell.exited = true;
        setState(shell, "exited with " + message.code, "exited");
      } else if (message.type === "stopped") {
        // A command may not run now (all the person's command slots are taken): it was stopped.
        said.replaceChildren(Workspace.refusal(429, message));
      }
    });
    socket.addEventListener("close", function (event) {
      shell.socket = null;
      if (shell.exited || shell.closed) return;
      if (event.code === 1008 || event.code === 1009) {
        setState(shell, "refused", "exited");
        return;
      }
      if (event.code === 4001) {
        // Another window took it over: taking it back is the person's choice, not a loop of two pages.
        setState(shell, "open in another window: click to take it back", "elsewhere");
        shell.elsewhere = true;
        return;
      }
      // Gone for good (closed elsewhere, its sandbox closed): the list no longer names it.
      shell.retries += 1;
      const wait = Math.min(30000, 500 * 2 ** Math.min(shell.retries, 6));
      setState(shell, "reconnecting", "connecting");
      shell.timer = setTimeout(() => stillOpen(shell).then((open) => open ? connect(shell) : gone(shell)), wait);
    });
  }

  async function stillOpen(shell) {
    try {
      const response = await fetch(listUrl, {credentials: "same-origin", headers: {Accept: "application/json"}});
      if (!response.ok) return true;
      return (await response.json()).some((row) => row.id === shell.row.id);
    } catch (error) {
      return true; // offline: keep trying
    }
  }

  function gone(shell) {
    shell.closed = true;
    setState(shell, "closed", "exited");
  }

  function send(shell, bytes) {
    if (shell.socket && shell.socket.readyState === WebSocket.OPEN && !shell.exited) shell.socket.send(bytes);
  }

  function control(shell, message) {
    if (shell.socket && shell.socket.readyState === WebSocket.OPEN && !shell.exited) {
      shell.socket.send(JSON.stringify(message));
    }
  }

  function refit(shell) {
    if (!shell.screen.hidden) {
      try { shell.fit.fit(); } catch (error) { /* not laid out yet */ }
    }
  }

  async function closeShell(shell) {
    shell.closed = true;
    clearTimeout(shell.timer);
    const {response, body} = await Workspace.sendJson(listUrl + "/" + shell.row.id, "DELETE");
    if (!response.ok && response.status !== 404) {
      shell.closed = false;
      said.replaceChildren(Workspace.refusal(response.status, body));
      return;
    }
    if (shell.socket) shell.socket.close();
    shell.term.dispose();
    shell.tab.remove();
    shell.screen.remove();
    shells.delete(shell.row.id);
    const next = Array.from(shells.values()).pop();
    if (next) show(next);
  }

  window.addEventListener("resize", () => shells.forEach(refit));
  // A tab that comes back (a phone waking up) reconnects at once rather than at its backoff.
  document.addEventListener("visibilitychange", function () {
    if (document.visibilityState !== "visible") return;
    shells.forEach((shell) => {
      if (!shell.socket && !shell.exited && !shell.closed && !shell.elsewhere) {
        clearTimeout(shell.timer);
        connect(shell);
      }
    });
  });
})();
