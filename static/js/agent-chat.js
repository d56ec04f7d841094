/* An item's chat (item page, investigation page): the message is sent with `Accept:
   text/event-stream`, and the agent's reply shows as it is written, each tool call listed as it
   starts and ends. Once the turn is stored, the conversation is read again from the page, so what
   stays on screen is what was stored: the reply as Markdown with its linked [n] markers and
   sources, and its trail collapsed under it. A refusal (a 507 quota above all) shows by the form.
   A page may take a message elsewhere first: `AgentChat.divert(content, chat)` (the investigation
   page sends one that mentions people to its mentions endpoint) resolves to true when it did. */
(function () {
  window.AgentChat = window.AgentChat || {};

  function start() {
    const form = document.getElementById("chat-form");
    if (!form || !window.Workspace) return;
    const textarea = form.querySelector("textarea");
    const button = form.querySelector("button[type=submit]");
    const status = form.querySelector("[data-testid=chat-status]");
    const refusalBox = form.querySelector("[data-testid=chat-refusal]");

    function conversation() { return document.querySelector("[data-testid=conversation]"); }

    function pendingMessage(role, label) {
      const item = document.createElement("li");
      item.className = "msg msg-" + role + " msg-pending";
      item.dataset.testid = "pending-" + role;
      const head = document.createElement("div");
      head.className = "msg-head";
      head.textContent = label;
      const body = document.createElement("p");
      body.className = "msg-body";
      body.dataset.testid = "pending-body";
      item.append(head, body);
      return item;
    }

    function liveStep(list, text) {
      const entry = document.createElement("li");
      entry.className = "agent-step";
      entry.dataset.testid = "live-step";
      entry.textContent = text;
      list.appendChild(entry);
      return entry;
    }

    /* The conversation (and the members an agent's mention may change) as stored, from the page. */
    async function reloadConversation(turn) {
      const changedStatus = turn.replies.some((reply) => reply.steps.some((step) => step.tool === "set_status" && step.ok));
      if (changedStatus) { window.location.reload(); return; }
      const response = await fetch(window.location.pathname, {credentials: "same-origin", headers: {"Accept": "text/html"}});
      if (!response.ok) { window.location.reload(); return; }
      const page = new DOMParser().parseFromString(await response.text(), "text/html");
      /* The agent's commands and file writes show on the item's Sandbox card and file list too
         (a file list someone is working in is left alone). */
      const files = document.querySelector("[data-testid=files-list]");
      const busyFiles = files && (files.contains(document.activeElement) || files.querySelector("details[open]"));
      ["conversation", "members", "sandbox", "item-meta", busyFiles ? null : "files-list"].forEach(function (testid) {
        if (!testid) return;
        const fresh = page.querySelector("[data-testid=" + testid + "]");
        const current = document.querySelector("[data-testid=" + testid + "]");
        if (fresh && current) current.replaceWith(document.adoptNode(fresh));
      });
      if (window.Knowledge) window.Knowledge.markers(conversation());
      const last = turn.replies.length ? document.getElementById("msg-" + turn.replies[turn.replies.length - 1].id) : null;
      if (last) last.scrollIntoView({block: "nearest"});
    }

    /* The page's diverter, if any; a diverter that throws leaves the message to the agent. */
    async function diverted(content) {
      const divert = window.AgentChat.divert;
      if (!divert) return false;
      const chat = {textarea: textarea, status: status, refusalBox: refusalBox, refresh: () => reloadConversation({replies: []})};
      try {
        return await divert(content, chat);
      } catch (error) {
        return false;
      }
    }

    form.addEventListener("submit", async function (event) {
      event.preventDefault();
      const content = textarea.value;
      if (!content.trim()) { textarea.focus(); return; }
      refusalBox.replaceChildren();
      button.disabled = true;
      if (await diverted(content)) { button.disabled = false; return; }
      const list = conversation();
      const empty = list.querySelector(".empty");
      if (empty) empty.remove();
      const asked = pendingMessage("user", "You · now");
      asked.querySelector(".msg-body").textContent = content;
      const reply = pendingMessage("agent", "Agent · answering");
      const body = reply.querySelector(".msg-body");
      body.setAttribute("aria-busy", "true");
      const steps = document.createElement("ol");
      steps.className = "agent-steps";
      steps.dataset.testid = "live-steps";
      reply.appendChild(steps);
      list.append(asked, reply);
      status.textContent = "The agent is answering…";
      let stored = null;
      let running = null;
      try {
        const response = await fetch(form.dataset.url, {
          method: "POST",
          credentials: "same-origin",
          headers: {"Content-Type": "application/json", "Accept": "text/event-stream", "X-CSRFToken": Workspace.csrfToken()},
          body: JSON.stringify({content: content}),
        });
        if (!response.ok) {
          const refusal = await response.json().catch(() => null);
          asked.remove();
          reply.remove();
          refusalBox.appendChild(Workspace.refusal(response.status, refusal));
          status.textContent = "";
          return;
        }
        textarea.value = "";  // the message is stored: whatever happens next, it is not lost
        await Workspace.readEvents(response, function (message) {
          if (message.event === "delta") {
            body.textContent += message.data.text;
          } else if (message.event === "restart") {
            body.textContent = "";
            status.textContent = message.data.detail;
          } else if (message.event === "tool") {
            running = liveStep(steps, message.data.summary + "…");
            status.textContent = "The agent is " + message.data.summary + "…";
          } else if (message.event === "step") {
            const done = running || liveStep(steps, "");
            done.textContent = message.data.summary;
            done.classList.toggle("agent-step-refused", !message.data.ok);
            running = null;
            status.textContent = "The agent is answering…";
          } else if (message.event === "turn") {
            stored = message.data;
          } else if (message.event === "error") {
            refusalBox.appendChild(Workspace.refusal(0, message.data));
          }
        });
      } catch (error) {
        refusalBox.appendChild(Workspace.refusal(0, {detail: "The connection was lost while the agent answered; reload the page to see what was stored."}));
      } finally {
        button.disabled = false;
      }
      if (stored) {
        status.textContent = "The agent answered.";
        await reloadConversation(stored);
      } else {
        status.textContent = "";
      }
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
