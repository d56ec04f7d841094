/* A person field that offers the user directory as the person types, as the Mention card does: an
   `<input data-people-picker data-users-url=…>` becomes a combobox over GET /users (read once, on
   focus), matching id, name and section; arrow keys move through the matches and Enter or a click
   fills in the picked person's id. Without JavaScript the field stays a plain text box, and the
   server takes an id or a name that one person alone has. */
(function () {
  "use strict";

  function enhance(input) {
    const options = document.createElement("ul");
    options.id = input.id + "-options";
    options.className = "people-options";
    options.setAttribute("role", "listbox");
    options.setAttribute("aria-label", "Matching people");
    options.dataset.testid = input.id + "-options";
    const status = document.createElement("p");
    status.className = "visually-hidden";
    status.setAttribute("aria-live", "polite");
    status.dataset.testid = input.id + "-status";
    input.after(options, status);
    input.setAttribute("role", "combobox");
    input.setAttribute("aria-autocomplete", "list");
    input.setAttribute("aria-expanded", "false");
    input.setAttribute("aria-controls", options.id);
    input.setAttribute("autocomplete", "off");

    let directory = null;  // a promise: the focus and the first keystroke share one request
    let matches = [];
    let active = -1;

    function loadDirectory() {
      directory = directory || Workspace.sendJson(input.dataset.usersUrl, "GET").then(function (answer) {
        if (!answer.response.ok || !Array.isArray(answer.body)) { directory = null; return []; }
        return answer.body;
      });
      return directory;
    }

    function showActive() {
      Array.from(options.children).forEach(function (option, index) {
        option.setAttribute("aria-selected", index === active ? "true" : "false");
      });
      if (active >= 0) input.setAttribute("aria-activedescendant", options.children[active].id);
      else input.removeAttribute("aria-activedescendant");
    }

    function closeOptions() {
      matches = [];
      active = -1;
      options.replaceChildren();
      input.setAttribute("aria-expanded", "false");
      input.removeAttribute("aria-activedescendant");
    }

    function pick(user) {
      input.value = user.id;
      closeOptions();
      status.textContent = user.name + " (" + user.id + ") picked.";
      input.focus();
    }

    async function renderOptions() {
      const users = await loadDirectory();
      const needle = input.value.trim().toLowerCase();
      closeOptions();
      if (!needle || document.activeElement !== input) { status.textContent = ""; return; }  // left meanwhile
      matches = users.filter(function (user) {
        return (user.id + " " + user.name + " " + user.section).toLowerCase().includes(needle);
      }).slice(0, 8);
      if (matches.length === 1 && matches[0].id === input.value.trim()) matches = [];  // already picked
      matches.forEach(function (user, index) {
        const option = document.createElement("li");
        option.id = input.id + "-option-" + index;
        option.setAttribute("role", "option");
        option.dataset.userId = user.id;
        option.textContent = user.name + " (" + user.id + (user.section ? ", " + user.section : "") + ")";
        option.addEventListener("mousedown", function (event) { event.preventDefault(); });
        option.addEventListener("click", function () { pick(user); });
        options.appendChild(option);
      });
      active = matches.length ? 0 : -1;
      input.setAttribute("aria-expanded", matches.length ? "true" : "false");
      showActive();
      status.textContent = matches.length
        ? matches.length + (matches.length === 1 ? " person matches." : " people match.")
        : "";
    }

    input.addEventListener("input", renderOptions);
    input.addEventListener("focus", loadDirectory);
    input.addEventListener("blur", closeOptions);
    input.addEventListener("keydown", function (event) {
      if (event.key === "ArrowDown" || event.key === "ArrowUp") {
        if (!matches.length) return;
        event.preventDefault();
        const step = event.key === "ArrowDown" ? 1 : -1;
        active = (active + step + matches.length) % matches.length;
        showActive();
      } else if (event.key === "Enter" && active >= 0) {
        // Enter picks the highlighted person; with the list closed it submits the form as usual.
        event.preventDefault();
        pick(matches[active]);
      } else if (event.key === "Escape" && matches.length) {
        event.preventDefault();
        closeOptions();
      }
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("input[data-people-picker]").forEach(enhance);
  });
})();
