/* The people combobox that the Owner fields (people-picker.js) and the Mention card share: the user
   directory (GET /users) read once a page, filtered as the person types on id, name and section;
   arrow keys move through the matches, Enter or a click picks one, Escape closes the list. Each
   picker brings its own input, listbox and live status, and says what picking someone does.
   Loads after workspace.js, whose `Workspace` it extends. */
(function () {
  "use strict";
  if (!window.Workspace) return;

  const directories = new Map();  // url -> a promise of the users; a failed read is tried again next time

  /* The directory as an array of users, one request per url however many callers ask. */
  function peopleDirectory(url) {
    if (!directories.has(url)) {
      directories.set(url, Workspace.sendJson(url, "GET").then(function (answer) {
        if (!answer.response.ok || !Array.isArray(answer.body)) { directories.delete(url); return []; }
        return answer.body;
      }));
    }
    return directories.get(url);
  }

  /* Makes `input` (already a role=combobox controlling `settings.listbox`) offer people.
     settings:
       listbox     the <ul role=listbox> (its id ends in "-options"; options are "…-option-N")
       status      the aria-live element saying how many match and who was picked
       usersUrl    where the directory is read
       choose      function (user): does the picking; returns what `status` says afterwards
       skip        optional function (user): true for someone not to offer (say, already chosen)
       noMatches   optional function (typed): what `status` says when no one matches ("" if absent)
       keepsPick   the field keeps the picked id (the Owner field): a sole match that is already its
                   value is not offered again, and Enter with nothing highlighted submits the form.
                   Without it Enter with something typed never submits (the Mention search).
       closeOnBlur the list closes when the field loses focus, and does not open once it has */
  function peopleCombobox(input, settings) {
    const options = settings.listbox;
    const status = settings.status;
    const optionIdPrefix = options.id.replace(/-options$/, "") + "-option-";
    let matches = [];
    let active = -1;

    function loadDirectory() { return peopleDirectory(settings.usersUrl); }

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
      closeOptions();
      status.textContent = settings.choose(user);
      input.focus();
    }

    async function renderOptions() {
      const users = await loadDirectory();
      const typed = input.value.trim();
      const needle = typed.toLowerCase();
      closeOptions();
      if (!needle || (settings.closeOnBlur && document.activeElement !== input)) {  // or left meanwhile
        status.textContent = "";
        return;
      }
      matches = users.filter(function (user) {
        return !(settings.skip && settings.skip(user))
          && (user.id + " " + user.name + " " + user.section).toLowerCase().includes(needle);
      }).slice(0, 8);
      if (settings.keepsPick && matches.length === 1 && matches[0].id === typed) matches = [];  // already picked
      matches.forEach(function (user, index) {
        const option = document.createElement("li");
        option.id = optionIdPrefix + index;
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
        : (settings.noMatches ? settings.noMatches(typed) : "");
    }

    input.addEventListener("input", renderOptions);
    input.addEventListener("focus", loadDirectory);
    if (settings.closeOnBlur) input.addEventListener("blur", closeOptions);
    input.addEventListener("keydown", function (event) {
      if (event.key === "ArrowDown" || event.key === "ArrowUp") {
        if (!matches.length) return;
        event.preventDefault();
        const step = event.key === "ArrowDown" ? 1 : -1;
        active = (active + step + matches.length) % matches.length;
        showActive();
      } else if (event.key === "Enter") {
        // Enter picks the highlighted person. Otherwise it submits the form as usual: in a field that
        // keeps the pick, whatever is typed; in a search box, only with nothing typed.
        if (settings.keepsPick ? active < 0 : !input.value.trim()) return;
        event.preventDefault();
        if (active >= 0) pick(matches[active]);
      } else if (event.key === "Escape" && matches.length) {
        event.preventDefault();
        closeOptions();
      }
    });
  }

  window.Workspace.peopleDirectory = peopleDirectory;
  window.Workspace.peopleCombobox = peopleCombobox;
})();
