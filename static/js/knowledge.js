/* Knowledge-base pages: dialogs, the people filter, citation markers and their previews, answers streamed as they are written. */
(function () {
  function dialogs() {
    document.querySelectorAll("[data-open-dialog]").forEach(function (button) {
      button.addEventListener("click", function () { document.getElementById(button.dataset.openDialog).showModal(); });
    });
    document.querySelectorAll("[data-close-dialog]").forEach(function (button) {
      button.addEventListener("click", function () { button.closest("dialog").close(); });
    });
    /* A form the server refused comes back open, with what was typed and why. */
    document.querySelectorAll("dialog[data-show-on-load]").forEach(function (dialog) { dialog.showModal(); });
  }

  function peopleFilter() {
    document.querySelectorAll("[data-filter-list]").forEach(function (input) {
      input.addEventListener("input", function () {
        var needle = input.value.trim().toLowerCase();
        document.querySelectorAll("#" + input.dataset.filterList + " li").forEach(function (item) {
          item.hidden = needle !== "" && item.dataset.filterText.indexOf(needle) === -1;
        });
      });
    });
  }

  /* A marker opens the source it names below the answer. Its preview shows on hover and on
     focus (CSS); Escape hides it until the pointer or focus leaves (WCAG 1.4.13), and so does
     opening the source: a tap on a phone both focuses the marker and opens the source, which the
     preview, hanging below the marker's line, then covered. A message holds one preview per
     source, hidden after it (however many markers cite the source, the page
     carries its text once): the preview moves beside the marker being hovered or focused. Every
     marker is described by it (aria-describedby) wherever it is, hidden or not. */
  function markers(root) {
    root.querySelectorAll("a.kb-marker").forEach(function (link) {
      var cite = link.closest(".kb-cite");
      function bringPreview() {
        var preview = document.getElementById(link.getAttribute("aria-describedby"));
        if (cite && preview && preview.parentNode !== cite) { cite.appendChild(preview); }
      }
      link.addEventListener("focus", bringPreview);
      if (cite) { cite.addEventListener("mouseenter", bringPreview); }
      link.addEventListener("click", function (event) {
        var target = document.getElementById(link.getAttribute("href").slice(1));
        if (!target) { return; }
        event.preventDefault();
        if (cite) { cite.classList.add("kb-preview-dismissed"); }
        target.open = true;
        target.classList.add("kb-highlight");
        target.scrollIntoView({block: "nearest"});
        setTimeout(function () { target.classList.remove("kb-highlight"); }, 1500);
      });
      if (!cite) { return; }
      function reset() { cite.classList.remove("kb-preview-dismissed"); }
      cite.addEventListener("mouseleave", reset);
      link.addEventListener("blur", reset);
    });
  }

  function dismissPreviewsOnEscape() {
    document.addEventListener("keydown", function (event) {
      if (event.key !== "Escape") { return; }
      document.querySelectorAll(".kb-cite:hover, .kb-cite:focus-within").forEach(function (cite) {
        cite.classList.add("kb-preview-dismissed");
      });
    });
  }

  /* The ask form streams the answer as the model writes it (server-sent events over the messages
     endpoint). Once the answer is stored, the transcript is read again from the page, so what
     stays on screen is what was stored, markers and sources included. Without streaming fetch
     the form posts as a plain form. */
  function streamedAsk() {
    var form = document.querySelector("[data-testid=ask-form]");
    if (!form || !window.fetch || !window.ReadableStream || !window.Workspace) { return; }
    var transcript = document.querySelector("[data-testid=transcript]");
    var textarea = form.querySelector("textarea");
    var button = form.querySelector("button[type=submit]");
    var status = form.querySelector("[data-testid=ask-status]");

    function say(text) { status.textContent = text; }

    function refuse(detail) {
      var box = Workspace.refusal(0, {detail: detail});
      box.classList.add("kb-form-error");
      form.insertBefore(box, form.querySelector("label"));
    }

    function article(role, label) {
      var node = document.createElement("article");
      node.className = "kb-message kb-" + role + " kb-pending";
      node.dataset.testid = "message-" + role;
      var meta = document.createElement("p");
      meta.className = "meta";
      meta.textContent = label;
      var body = document.createElement("div");
      body.className = "kb-message-body kb-streaming";
      body.dataset.testid = "message-body";
      node.append(meta, body);
      return node;
    }

    async function reloadTranscript(answerId) {
      var response = await fetch(window.location.pathname, {credentials: "same-origin", headers: {"Accept": "text/html"}});
      if (!response.ok) { window.location.reload(); return; }
      var page = new DOMParser().parseFromString(await response.text(), "text/html");
      var fresh = page.querySelector("[data-testid=transcript]");
      if (!fresh) { window.location.reload(); return; }
      transcript.replaceWith(document.adoptNode(fresh));
      transcript = fresh;
      markers(transcript);
      var stored = document.getElementById("msg-" + answerId);
      if (stored) { stored.scrollIntoView({block: "nearest"}); }
    }

    form.addEventListener("submit", async function (event) {
      event.preventDefault();
      var question = textarea.value;
      if (!question.trim()) { textarea.focus(); return; }
      form.querySelectorAll(".kb-form-error").forEach(function (node) { node.remove(); });
      button.disabled = true;
      var empty = transcript.querySelector(".empty");
      if (empty) { empty.remove(); }
      var asked = article("user", "You asked · now");
      asked.querySelector(".kb-message-body").textContent = question;
      var answer = article("assistant", "Answer · being written");
      var body = answer.querySelector(".kb-message-body");
      body.setAttribute("aria-busy", "true");
      transcript.append(asked, answer);
      say("Answering…");
      var stored = null;
      try {
        var response = await fetch(form.action, {
          method: "POST",
          credentials: "same-origin",
          headers: {"Content-Type": "application/json", "Accept": "text/event-stream", "X-CSRFToken": Workspace.csrfToken()},
          body: JSON.stringify({content: question}),
        });
        if (!response.ok) {
          var refusal = await response.json().catch(function () { return null; });
          asked.remove();
          answer.remove();
          refuse((refusal && refusal.detail) || "The question was not sent (HTTP " + response.status + ").");
          say("");
          return;
        }
        await Workspace.readEvents(response, function (message) {
          if (message.event === "delta") {
            body.textContent += message.data.text;
          } else if (message.event === "restart") {
            body.textContent = "";
            say(message.data.detail);
          } else if (message.event === "answer") {
            stored = message.data;
          } else if (message.event === "error") {
            refuse(message.data.detail);
          }
        });
      } catch (error) {
        refuse("The connection was lost while the answer was written; reload the page to see whether it was stored.");
      } finally {
        button.disabled = false;
      }
      if (stored) {
        textarea.value = "";
        say("Answered.");
        await reloadTranscript(stored.answer.id);
      } else {
        asked.remove();
        answer.remove();
        say("");
      }
    });
  }

  function start() { dialogs(); peopleFilter(); markers(document); dismissPreviewsOnEscape(); streamedAsk(); }
  /* Item and investigation conversations render answers with the same markers (agent-chat.js). */
  window.Knowledge = {markers: markers};
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", start); } else { start(); }
})();
