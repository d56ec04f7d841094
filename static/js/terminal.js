/* The item page's terminal: each command gets its own block, runs after the ones before it, shows
   that it is running, streams its output (server-sent events over the exec endpoint), and ends with
   its exit code, a timeout, or the refusal with every limit that bound. The Sandbox card follows. */
(function () {
  const form = document.getElementById("exec-form");
  if (!form) return;
  const output = document.getElementById("exec-output");
  const input = document.getElementById("exec-command");
  let queue = Promise.resolve();

  form.addEventListener("submit", function (event) {
    event.preventDefault();
    const command = input.value;
    if (!command.trim()) return;
    input.value = "";
    const block = newBlock(command);
    queue = queue.then(() => run(command, block));
  });

  function newBlock(command) {
    const block = document.createElement("div");
    block.className = "ws-run";
    block.dataset.testid = "exec-block";
    const head = document.createElement("div");
    head.className = "ws-run-head";
    head.textContent = "$ " + command;
    const status = document.createElement("span");
    status.className = "ws-run-status";
    status.dataset.testid = "exec-status";
    status.textContent = "queued";
    head.appendChild(status);
    const text = document.createElement("pre");
    text.className = "ws-run-output";
    block.append(head, text);
    output.appendChild(block);
    output.scrollTop = output.scrollHeight;
    return {block: block, status: status, text: text};
  }

  function write(run, text, stream) {
    const piece = document.createElement("span");
    if (stream === "stderr") piece.className = "ws-stderr";
    piece.textContent = text;
    run.text.appendChild(piece);
    output.scrollTop = output.scrollHeight;
  }

  async function run(command, view) {
    const started = Date.now();
    const tick = () => { view.status.textContent = "running " + Math.round((Date.now() - started) / 1000) + " s"; };
    tick();
    view.block.classList.add("running");
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
        view.block.appendChild(Workspace.refusal(response.status, body));
        view.status.textContent = "refused";
        return;
      }
      await readEvents(response, view);
    } catch (error) {
      write(view, "error: " + error + "\n", "stderr");
      view.status.textContent = "failed";
    } finally {
      clearInterval(timer);
      view.block.classList.remove("running");
      refreshSandboxCard();
    }
  }

  async function readEvents(response, view) {
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let pending = "";
    for (;;) {
      const {value, done} = await reader.read();
      if (done) break;
      pending += decoder.decode(value, {stream: true});
      let end;
      while ((end = pending.indexOf("\n\n")) >= 0) {
        handle(parse(pending.slice(0, end)), view);
        pending = pending.slice(end + 2);
      }
    }
  }

  function parse(frame) {
    const fields = {};
    frame.split("\n").forEach((line) => {
      const at = line.indexOf(": ");
      if (at > 0) fields[line.slice(0, at)] = line.slice(at + 2);
    });
    return {event: fields.event, data: fields.data ? JSON.parse(fields.data) : {}};
  }

  function handle(message, view) {
    if (message.event === "output") {
      write(view, message.data.text, message.data.stream);
    } else if (message.event === "result") {
      const result = message.data;
      if (result.stdout_truncated || result.stderr_truncated) write(view, "[output truncated]\n");
      const took = result.duration_ms < 1000 ? result.duration_ms + " ms" : (result.duration_ms / 1000).toFixed(1) + " s";
      if (result.timed_out) {
        write(view, "[timed out after " + took + ": the command was stopped]\n", "stderr");
        view.status.textContent = "timed out";
      } else {
        view.status.textContent = "done in " + took;
      }
      write(view, "[exit " + result.exit_code + "]\n");
    } else if (message.event === "error") {
      view.block.appendChild(Workspace.refusal(503, message.data));
      view.status.textContent = "failed";
    }
  }

  /* The card is the server's: fetch the page again and take its Sandbox card. */
  async function refreshSandboxCard() {
    const card = document.querySelector("[data-testid=sandbox]");
    if (!card) return;
    try {
      const response = await fetch(window.location.href, {credentials: "same-origin", headers: {"Accept": "text/html"}});
      if (!response.ok) return;
      const page = new DOMParser().parseFromString(await response.text(), "text/html");
      const fresh = page.querySelector("[data-testid=sandbox]");
      if (fresh) card.replaceWith(fresh);
    } catch (error) {
      /* The next page load shows it; the run itself is already on screen. */
    }
  }
})();
