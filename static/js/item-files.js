/* The item page's Files card: opening "Rename" puts the cursor on the name ready to type over
   (and closes any other), and Escape closes it again. A delete asks first (workspace.js). */
(function () {
  const card = document.getElementById("files");
  if (!card) return;

  card.addEventListener("toggle", function (event) {
    const rename = event.target;
    if (!rename.matches || !rename.matches("details.ws-rename") || !rename.open) return;
    card.querySelectorAll("details.ws-rename[open]").forEach((other) => { if (other !== rename) other.open = false; });
    const input = rename.querySelector("input[name=target]");
    const path = input.value;
    input.focus();
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
