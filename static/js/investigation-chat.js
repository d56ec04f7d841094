/* An investigation's chat composer: a message that mentions people goes to the investigation's
   mentions endpoint, the message as its note, and not to the agent (spec Area B 5: a mention
   notifies and never runs the agent), so it opens no sandbox and no quota can refuse it. A mention
   is `@` opening a word, followed by an id the user directory (GET /users) knows, in the person's
   own words: not in code (fenced, indented or inline) nor in a quoted line, which are pasted text
   as they are to the agent. Any other message, `@nobody` included, goes to the agent as before. */
(function () {
  // Not inside an address such as alice@example.com: the `@` opens a word.
  const CANDIDATE = /(?<![\w@.+-])@([\w.+-]+)/g;

  function ownWords(text) {
    const kept = [];
    let fence = null;
    text.split("\n").forEach(function (line) {
      const marker = line.match(/^ {0,3}(```|~~~)/);
      if (fence) { if (marker && marker[1] === fence) fence = null; return; }
      if (marker) { fence = marker[1]; return; }
      if (/^\s*>/.test(line) || /^( {4}|\t)/.test(line)) return;
      kept.push(line.replace(/`[^`\n]*`/g, " "));
    });
    return kept.join("\n");
  }

  /* The ids mentioned, in the order first named; `known` maps an id to its user. */
  function mentionedIds(text, known) {
    const ids = [];
    for (const match of ownWords(text).matchAll(CANDIDATE)) {
      // A sentence may end right after the name: "ask @bob."
      const id = [match[1], match[1].replace(/[.+-]+$/, "")].find((candidate) => known.has(candidate));
      if (id && !ids.includes(id)) ids.push(id);
    }
    return ids;
  }

  function listed(words) {
    return words.length < 2 ? words.join("") : words.slice(0, -1).join(", ") + " and " + words[words.length - 1];
  }

  /* Who was mentioned, and (as the Mention card warns) who cannot open the investigation. */
  function said(ids, known, outsiders, mayAdd) {
    const names = ids.map((id) => known.get(id).name + " (@" + id + ")");
    let text = "Mentioned " + listed(names) + ": notified, and the agent was not asked.";
    if (outsiders.length) {
      text += " " + listed(outsiders) + (outsiders.length === 1 ? " is not a member: they" : " are not members: they")
        + " cannot open this investigation until " + (mayAdd ? "you add them." : "its owner adds them.");
    }
    return text;
  }

  /* The owner may let the people just mentioned in there and then, as the Mention card offers
     (POST /investigations/<id>/members); anyone else only reads the warning. */
  function offerToAdd(outsiders, chat, participants, addUrl) {
    const offer = document.createElement("p");
    offer.dataset.testid = "chat-add-offer";
    const button = document.createElement("button");
    button.type = "button";
    button.className = "secondary";
    button.textContent = "Add " + listed(outsiders) + (outsiders.length === 1 ? " as a member" : " as members");
    offer.appendChild(button);
    button.addEventListener("click", async function () {
      chat.refusalBox.replaceChildren();
      const {response, body} = await Workspace.sendJson(addUrl, "POST", {user_ids: outsiders});
      if (!response.ok) { chat.refusalBox.appendChild(Workspace.refusal(response.status, body)); return; }
      body.members.forEach((id) => participants.add(id));
      document.querySelector("[data-testid=members]").textContent = body.members.join(", ") || "none yet";
      offer.remove();
      chat.status.textContent = listed(outsiders) + (outsiders.length === 1 ? " is now a member." : " are now members.");
      chat.textarea.focus();
    });
    chat.status.after(offer);
  }

  function start() {
    const chatCard = document.getElementById("investigation-chat");
    if (!chatCard || !window.Workspace) return;
    const participants = new Set(JSON.parse(document.getElementById("investigation-participants").textContent));

    /* The directory as a Map from id to user, read once with the Mention card (people-combobox.js);
       a failed read is tried again next time. */
    async function loadDirectory() {
      const users = await Workspace.peopleDirectory(chatCard.dataset.usersUrl);
      return new Map(users.map((user) => [user.id, user]));
    }

    async function post(ids, note) {
      try {
        return await Workspace.sendJson(chatCard.dataset.mentionsUrl, "POST", {user_ids: ids, note: note});
      } catch (error) {
        const detail = "The connection was lost while sending the mention; reload the page to see whether it was stored.";
        return {response: {ok: false, status: 0}, body: {detail: detail}};
      }
    }

    // The Mention card's add button is on the page for the owner (and staff) only.
    const addButton = document.getElementById("mention-add-members");
    const addUrl = addButton ? addButton.dataset.url : "";

    window.AgentChat = window.AgentChat || {};
    window.AgentChat.divert = async function (content, chat) {
      chatCard.querySelectorAll("[data-testid=chat-add-offer]").forEach((offer) => offer.remove());
      if (!content.includes("@")) return false;
      const known = await loadDirectory();
      const ids = mentionedIds(content, known);
      if (!ids.length) return false;
      chat.status.textContent = "Mentioning " + listed(ids.map((id) => "@" + id)) + "…";
      const answer = await post(ids, content.trim());
      if (!answer.response.ok) {
        chat.status.textContent = "";
        chat.refusalBox.appendChild(Workspace.refusal(answer.response.status, answer.body));
        return true;  // the draft stays, to be corrected or sent again
      }
      chat.textarea.value = "";
      const outsiders = ids.filter((id) => !participants.has(id));
      chat.status.textContent = said(ids, known, outsiders, Boolean(addUrl));
      if (outsiders.length && addUrl) offerToAdd(outsiders, chat, participants, addUrl);
      await chat.refresh();
      const stored = answer.body && document.getElementById("msg-" + answer.body.id);
      if (stored) stored.scrollIntoView({block: "nearest"});
      return true;
    };
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
