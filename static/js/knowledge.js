/* Knowledge-base pages: dialogs, the people filter, citation markers and their previews. */
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
     focus (CSS); Escape hides it until the pointer or focus leaves (WCAG 1.4.13). */
  function markers() {
    document.querySelectorAll("a.kb-marker").forEach(function (link) {
      var cite = link.closest(".kb-cite");
      link.addEventListener("click", function (event) {
        var target = document.getElementById(link.getAttribute("href").slice(1));
        if (!target) { return; }
        event.preventDefault();
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
    document.addEventListener("keydown", function (event) {
      if (event.key !== "Escape") { return; }
      document.querySelectorAll(".kb-cite:hover, .kb-cite:focus-within").forEach(function (cite) {
        cite.classList.add("kb-preview-dismissed");
      });
    });
  }

  function start() { dialogs(); peopleFilter(); markers(); }
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", start); } else { start(); }
})();
