/* The item page's Files card: opening "Rename" (or a payer's "Shrink") puts the cursor in its
   field ready to type over (and closes any other box), and Escape closes it again. A delete asks
   first (workspace.js). */
(function () {
  const card = document.getElementById("files");
  if (!card) return;

  card.addEventListener("toggle", function (event) {
    const rename = event.target;
    if (!rename.matches || !rename.matches("details.ws-rename") || !rename.open) return;
    card.querySelectorAll("details.ws-rename[open]").forEach((other) => { if (other !== rename) other.open = false; });
    const input = rename.querySelector("input:not([type=hidden])");
    /* The toggle event comes a moment after the box opened: someone already typing there keeps
       what they typed and where their cursor is. */
    if (document.activeElement === input || input.value !== input.defaultValue) return;
    input.focus();
    if (input.name !== "target") { input.select(); return; }
    const path = input.value;
    /* The name without its folder and extension is what people usually change. */
    const start = path.lastIndexOf("/") + 1;
    const dot = path.lastIndexOf(".");
    input.setSelectionRange(start, dot > start ? dot : path.length);
  }, true);

  /* Escape closes an open rename box and puts the focus back on its button. */
  card.addEventListener("keydown", function (event) {
    const rename = event.key === "Escape" && event.target.closest("details.ws-rename[open]");
    if (!rename) return;
    rename.open = false;
    rename.querySelector("summary").focus();
  });
})();
