/* The item page's terminal. Each command gets its own block and runs after the ones before it,
   so outputs never mix. A block shows that it is queued or running (and when it will be stopped),
   with a Stop button while it runs, streams its output (server-sent events over the exec
   endpoint), and ends with its exit code and why it ended (its time limit, the memory limit, a
   stop, its sandbox closed: the result's `reason`), or the refusal with every limit that bound.
   The Sandbox card and the file list follow each run. The transcript outlives a page load
   (sessionStorage), and ↑/↓ recall commands. */
(function () {
  const form = document.getElementById("exec-form");
  if (!form) return;
  const output = document.getElementById("exec-output");
  const input = document.getElementById("exec-command");
  const clear = document.getElementById("exec-clear");
  const announce = document.getElementById("exec-announce");
  const storageKey = "ws-terminal:" + form.dataset.url;
  const keptBytes = 200000;
  const views = [];
  let queue = Promise.resolve();
  let recall = null;
  let refreshes = 0;
  /* The card's "shut down" note, kept until the next command is sent: a run's own refresh of
     the card may land after the close's and must not wipe it. */
  let closedNote = null;

  form.addEventListener("submit", function (event) {
    event.preventDefault();
    const command = input.value;
    if (!command.trim()) return;
    input.value = "";
    recall = null;
    closedNote = null;
    const view = newBlock({command: command, state: "queued", label: "queued", pieces: [], refusal: null});
    queue = queue.then(() => run(command, view));
  });

  input.addEventListener("keydown", function (event) {
    if (event.key !== "ArrowUp" && event.key !== "ArrowDown") return;
    const commands = views.map((view) => view.record.command);
    if (!commands.length) return;
    event.preventDefault();
    const last = commands.length;
    recall = recall === null ? last : recall;
    recall = Math.max(0, Math.min(last, recall + (event.key === "ArrowUp" ? -1 : 1)));
    input.value = recall === last ? "" : commands[recall];
  });

  clear.addEventListener("click", function () {
    views.filter((view) => !isActive(view)).forEach((view) => view.block.remove());
    views.splice(0, views.length, ...views.filter(isActive));
    save();
    clear.hidden = views.length === 0;
    input.focus();
  });

  window.addEventListener("pagehide", save);

  /* "Close sandbox" without leaving the page, so a command it stops ends in its block (the card
     is replaced after each run, so the listener sits on the document). */
  document.addEventListener("submit", async function (event) {
    const close = event.target.closest("[data-testid=sandbox] form");
    if (!close) return;
    event.preventDefault();
    const button = close.querySelector("button");
    button.disabled = true;
    const {response, body} = await Workspace.sendJson(close.action, "DELETE");
    if (response.ok) {
      closedNote = document.createElement("p");
      closedNote.className = "ws-card-said";
      closedNote.setAttribute("role", "status");
      closedNote.dataset.testid = "sandbox-closed";
      closedNote.textContent = "The sandbox is shut down: whatever ran in it has stopped.";
      await refreshCards();
      showClosedNote();
    } else {
      button.disabled = false;
      close.after(Workspace.refusal(response.status, body));
    }
  });

  function isActive(view) {
    return view.record.state === "queued" || view.record.state === "running";
  }

  function newBlock(record) {
    const block = document.createElement("div");
    block.className = "ws-run";
    block.dataset.testid = "exec-block";
    const head = document.createElement("div");
    head.className = "ws-run-head";
    const command = document.createElement("span");
    command.className = "ws-run-command";
    command.textContent = "$ " + record.command;
    const status = document.createElement("span");
    status.className = "ws-run-status";
    status.dataset.testid = "exec-status";
    const stop = document.createElement("button");
    stop.type = "button";
    stop.className = "small danger ws-run-stop";
    stop.dataset.testid = "exec-stop";
    stop.textContent = "Stop";
    stop.hidden = true;
    stop.setAttribute("aria-label", "Stop " + record.command);
    head.append(command, status, stop);
    const text = document.createElement("pre");
    text.className = "ws-run-output";
    block.append(head, text);
    output.appendChild(block);
    const view = {block: block, status: status, text: text, stop: stop, record: record};
    stop.addEventListener("click", () => stopRun(view));
    views.push(view);
    clear.hidden = false;
    setStatus(view, record.state, record.label);
    record.pieces.forEach((piece) => show(view, piece[1], piece[0]));
    if (record.refusal) block.appendChild(Workspace.refusal(record.refusal.status, record.refusal.body));
    output.scrollTop = output.scrollHeight;
    return view;
  }

  function setStatus(view, state, label) {
    view.record.state = state;
    view.record.label = label;
    view.status.dataset.state = state;
    view.status.textContent = label;
    view.block.classList.toggle("running", state === "running");
    if (state !== "running") view.stop.hidden = true;
  }

  /* Stops the block's command (not the sandbox); its result then says who stopped it. */
  async function stopRun(view) {
    if (!view.execId) return;
    view.stop.disabled = true;
    const {response, body} = await Workspace.sendJson(form.dataset.execsUrl + "/" + view.execId + "/stop", "POST");
    if (!response.ok && response.status !== 404) {
      view.stop.disabled = false;
      view.block.appendChild(Workspace.refusal(response.status, body));
    }
  }

  function show(view, text, stream) {
    const piece = document.createElement("span");
    if (stream === "stderr") piece.className = "ws-stderr";
    if (stream === "note") piece.className = "ws-note";
    piece.textContent = text;
    view.text.appendChild(piece);
  }

  function write(view, text, stream) {
    view.record.pieces.push([stream || "stdout", text]);
    show(view, text, stream);
    output.scrollTop = output.scrollHeight;
  }

  function refuse(view, status, body, label) {
    view.record.refusal = {status: status, body: body};
    view.block.appendChild(Workspace.refusal(status, body));
    setStatus(view, "refused", label);
    output.scrollTop = output.scrollHeight;
  }

  /* The status line of each `reason` other than "exited" and "timed_out". */
  const endings = {
    stopped: (result) => "stopped" + (result.ended_by ? " by " + result.ended_by : ""),
    memory_limit: () => "killed: out of memory",
    sandbox_closed: (result) => "sandbox closed" + (result.ended_by ? " by " + result.ended_by : ""),
  };

  /* A negative code is the signal that ended the process (the sandbox closed under it, say). */
  function exited(code) {
    return code < 0 ? "killed by signal " + -code : "exit " + code;
  }

  function took(milliseconds) {
    return milliseconds < 1000 ? milliseconds + " ms" : (milliseconds / 1000).toFixed(1) + " s";
  }

  async function run(command, view) {
    const started = Date.now();
    let limit = form.dataset.timeout;
    const tick = () => {
      // The result may end the block before the stream closes: a tick after it must not mark the
      // block running again (it would then read as "the connection ended before the command did").
      if (view.record.state !== "queued" && view.record.state !== "running") return;
      const seconds = Math.round((Date.now() - started) / 1000);
      setStatus(view, "running", "running " + seconds + " s" + (limit ? " · stops at " + limit : ""));
    };
    tick();
    const timer = setInterval(tick, 1000);
    try {
      const response = await fetch(form.dataset.url, {
        method: "POST",
        credentials: "same-origin",
        headers: {"Content-Type": "application/json", "Accept": "text/event-stream", "X-CSRFToken": Workspace.csrfToken()},
        body: JSON.stringify({command: command}),
      });
      if (!response.ok) {
        const body = await response.json().catch(() => null);
        refuse(view, response.status, body, response.status === 507 ? "refused: over a limit" : "refused");
        return;
      }
      await Workspace.readEvents(response, (message) => {
        if (message.event === "started") {
          limit = message.data.timeout_seconds + " s";
          view.execId = message.data.exec_id;
          view.stop.hidden = !view.execId;
          tick();
          if (message.data.sandbox_opened) refreshCards();
        } else {
          handle(message, view);
        }
      });
      if (view.record.state === "running") {
        write(view, "[the connection ended before the command did]\n", "note");
        setStatus(view, "failed", "no result");
      }
    } catch (error) {
      write(view, "[" + error + "]\n", "note");
      setStatus(view, "failed", "failed");
    } finally {
      clearInterval(timer);
      announce.textContent = "$ " + command + ": " + view.record.label;
      save();
      refreshCards();
    }
  }

  function handle(message, view) {
    if (message.event === "output") {
      write(view, message.data.text, message.data.stream);
    } else if (message.event === "result") {
      const result = message.data;
      if (result.stdout_truncated || result.stderr_truncated) write(view, "[output truncated]\n", "note");
      const ended = exited(result.exit_code);
      /* Why it ended is a sentence in its stderr already (`reason_detail`); the status says it short. */
      const why = endings[result.reason];
      if (result.timed_out || result.reason === "timed_out") {
        if (!result.reason_detail) write(view, "[timed out after " + took(result.duration_ms) + ": the command was stopped]\n", "note");
        setStatus(view, "timed-out", "timed out after " + took(result.duration_ms));
      } else if (why) {
        write(view, "[" + ended + "]\n", "note");
        setStatus(view, "failed", ended + " · " + why(result));
      } else {
        write(view, "[" + ended + "]\n", "note");
        if (result.sandbox_closed) setStatus(view, "failed", ended + " · sandbox stopped");
        else setStatus(view, result.exit_code === 0 ? "ok" : "failed", ended + " · " + took(result.duration_ms));
      }
    } else if (message.event === "error") {
      refuse(view, 503, message.data, "failed");
    }
  }

  /* What a page load should find again: finished blocks as they are, a block cut off by leaving
     the page marked so, the newest kept when the transcript grows past `keptBytes`. */
  function save() {
    const records = views.map((view) => {
      const record = Object.assign({}, view.record);
      if (record.state === "running") Object.assign(record, {state: "failed", label: "left the page while it ran"});
      if (record.state === "queued") Object.assign(record, {state: "failed", label: "not run: left the page"});
      return record;
    });
    let text = JSON.stringify(records);
    while (records.length > 1 && text.length > keptBytes) {
      records.shift();
      text = JSON.stringify(records);
    }
    try {
      window.sessionStorage.setItem(storageKey, text);
    } catch (error) {
      /* Storage full or off: the transcript just does not outlive this page. */
    }
  }

  function restore() {
    let records = [];
    try {
      records = JSON.parse(window.sessionStorage.getItem(storageKey) || "[]");
    } catch (error) {
      records = [];
    }
    records.forEach((record) => newBlock(record));
  }

  /* The cards are the server's: fetch the page again and take its Sandbox card, and its file list
     unless the person is using it (focus inside, a rename open). */
  async function refreshCards() {
    const mine = ++refreshes;
    try {
      const response = await fetch(form.dataset.itemUrl, {credentials: "same-origin", headers: {"Accept": "text/html"}});
      if (!response.ok) return;
      const page = new DOMParser().parseFromString(await response.text(), "text/html");
      if (mine !== refreshes) return;  /* a later refresh knows better */
      swap(page, "[data-testid=sandbox]");
      showClosedNote();
      swap(page, "[data-testid=item-meta]");
      const files = document.querySelector("[data-testid=files-list]");
      if (files && !files.contains(document.activeElement) && !files.querySelector("details[open]")) {
        swap(page, "[data-testid=files-list]");
      }
    } catch (error) {
      /* The next page load shows them; the run itself is already on screen. */
    }
  }

  function showClosedNote() {
    if (!closedNote) return;
    const card = document.querySelector("[data-testid=sandbox]");
    if (!card) return;
    /* A card still showing the closed sandbox (a refresh that started before the close) waits
       for the next one; the note is dropped when a command is sent (it opens a sandbox again). */
    if (card.querySelector("[data-testid=no-sandbox]") && !card.contains(closedNote)) card.appendChild(closedNote);
  }

  function swap(page, selector) {
    const current = document.querySelector(selector);
    const fresh = page.querySelector(selector);
    if (current && fresh) current.replaceWith(document.adoptNode(fresh));
  }

  restore();
})();
