/* A person field that offers the user directory as the person types, as the Mention card does: an
   `<input data-people-picker data-users-url=…>` becomes a combobox over GET /users (read once, on
   focus), matching id, name and section; arrow keys move through the matches and Enter or a click
   fills in the picked person's id. Without JavaScript the field stays a plain text box, and the
   server takes an id or a name that one person alone has. The combobox itself is people-combobox.js,
   which the page loads first. */
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

    Workspace.peopleCombobox(input, {
      listbox: options,
      status: status,
      usersUrl: input.dataset.usersUrl,
      keepsPick: true,
      closeOnBlur: true,
      choose: function (user) {
        input.value = user.id;
        return user.name + " (" + user.id + ") picked.";
      },
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    if (!window.Workspace || !Workspace.peopleCombobox) return;  // a plain text box, as without JavaScript
    document.querySelectorAll("input[data-people-picker]").forEach(enhance);
  });
})();
