/* Workflow pages: the step editor (add, remove, reorder) and a run's busy state; confirmations are workspace.js's. */
(function () {
  function stepEditor(list) {
    const fieldset = list.closest("fieldset");
    const addButton = fieldset.querySelector("[data-step-add]");
    const rows = () => Array.from(list.querySelectorAll("[data-step]"));

    function grow(area) {
      area.style.height = "auto";
      area.style.height = area.scrollHeight + 2 + "px";
    }

    /* Labels, ids and button names follow the order, so a screen reader hears "Move step 3 up". */
    function renumber() {
      const all = rows();
      all.forEach(function (row, index) {
        const number = index + 1;
        const area = row.querySelector("textarea");
        const label = row.querySelector("[data-step-label]");
        area.id = "wf-step-" + number;
        label.htmlFor = area.id;
        label.textContent = "Step " + number;
        const [up, down] = row.querySelectorAll("[data-step-move]");
        up.setAttribute("aria-label", "Move step " + number + " up");
        down.setAttribute("aria-label", "Move step " + number + " down");
        up.disabled = index === 0;
        down.disabled = index === all.length - 1;
        row.querySelector("[data-step-remove]").setAttribute("aria-label", "Remove step " + number);
      });
    }

    function addRow() {
      const row = rows()[0].cloneNode(true);
      row.querySelector("textarea").value = "";
      list.appendChild(row);
      renumber();
      const area = row.querySelector("textarea");
      grow(area);
      area.focus();
    }

    list.addEventListener("click", function (event) {
      const button = event.target.closest("button");
      if (!button) return;
      const row = button.closest("[data-step]");
      if (button.hasAttribute("data-step-remove")) {
        const next = row.nextElementSibling || row.previousElementSibling;
        if (rows().length === 1) { row.querySelector("textarea").value = ""; row.querySelector("textarea").focus(); return; }
        row.remove();
        renumber();
        (next ? next.querySelector("textarea") : addButton).focus();
        return;
      }
      const offset = parseInt(button.dataset.stepMove, 10);
      const sibling = offset < 0 ? row.previousElementSibling : row.nextElementSibling;
      if (!sibling) return;
      if (offset < 0) list.insertBefore(row, sibling); else list.insertBefore(sibling, row);
      renumber();
      button.disabled ? row.querySelector("textarea").focus() : button.focus();
    });
    list.addEventListener("input", function (event) {
      if (event.target.matches("textarea")) grow(event.target);
    });
    list.querySelectorAll("[data-step-tools]").forEach((tools) => { tools.hidden = false; });
    addButton.hidden = false;
    addButton.addEventListener("click", addRow);
    list.querySelectorAll("textarea").forEach(grow);
    renumber();
  }

  /* A run takes as long as its steps: the button says so instead of looking dead. */
  function busyWhileSubmitting(form) {
    const button = form.querySelector("button[type=submit]");
    const status = form.querySelector("[role=status]");
    form.addEventListener("submit", function () {
      form.setAttribute("aria-busy", "true");
      if (status) status.textContent = form.dataset.runningText;
      // Disabled after the submission has started, so the form still sends.
      setTimeout(function () { button.disabled = true; }, 0);
    });
    // Back from the next page (bfcache): the form is usable again.
    window.addEventListener("pageshow", function () {
      button.disabled = false;
      form.removeAttribute("aria-busy");
      if (status) status.textContent = "";
    });
  }

  function start() {
    // A refused save: the summary of what to change is read out first.
    const summary = document.getElementById("error-summary");
    if (summary) summary.focus();
    document.querySelectorAll("[data-step-list]").forEach(stepEditor);
    document.querySelectorAll("form[data-running-text]").forEach(busyWhileSubmitting);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
