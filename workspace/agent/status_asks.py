"""Which status an asker's own message asks an investigation to move to, read as a phrase.

The model agent may call `set_status` only for a status the asker asked for. A keyword was not
enough: "\\bclos" found "the closing of the checkout window", "open" found "open the log", so text
steering the model (a document, a command's output) could move an investigation on a word the asker
wrote about something else. A request counts when a sentence of the asker's own prose says it:

- the status word after a verb that sets it: "set the status to closed", "change its status to
  in progress", "mark it resolved", "mark this investigation as closed", "move it to in progress";
- a verb of the status with the investigation as its object: "close this investigation", "resolve
  the incident", "reopen the investigation", or a bare "this" ending the clause ("please resolve this.");
- the deterministic agent's own line, `@status closed`.

Nothing counts inside code or a quote (a pasted log), nor in a sentence that negates, questions or
makes the move wait on a condition the model would judge ("don't close the investigation", "why
did you close the investigation?", "if the fix holds, close the investigation").
"""

from __future__ import annotations

import re

# The statuses as a message spells them, after "to"/"as" or alone ("mark it resolved").
_VALUES = {
    "open": r"(?:re)?open(?:ed)?",
    "in_progress": r"in[ _-]?progress",
    "resolved": r"resolved",
    "closed": r"closed",
}
# The verb whose object is the investigation, for the statuses that have one.
_VERBS = {"open": r"reopen", "resolved": r"resolve", "closed": r"close"}
_THING = r"(?:investigation|incident|rca|case)"
# "this investigation", "the incident", "our rca"; or "this" alone where the clause ends.
_INVESTIGATION = rf"(?:(?:this|the|our)\s+{_THING}\b|this(?=\s*(?:[,.!;:)]|$|\s+(?:now|please)\b)))"
_PRONOUN = rf"(?:it|this(?:\s+{_THING})?|(?:the|our)\s+{_THING})"
_STATUS_NOUN = rf"(?:(?:the|its|this|(?:the|this)\s+{_THING}'?s)\s+)?status"
_SETTER = r"(?:set|change|move|switch|update|put|turn|make)"


def _phrases(status: str) -> re.Pattern[str]:
    # Not "set it to open the log": a status word is not followed by an object of its own.
    value = rf"(?:{_VALUES[status]})\b(?!\s+(?:the|a|an|this|that|these|those|it|its|my|your|our|their)\b)"
    forms = [
        rf"\b{_SETTER}\s+{_STATUS_NOUN}(?:\s+(?:to|as|into)\s+|\s*:\s*){value}",
        rf"\b(?:mark|flag)\s+{_PRONOUN}\s+(?:as\s+)?{value}",
        rf"\b(?:set|move|put|switch)\s+{_PRONOUN}\s+(?:to|into|as)\s+{value}",
        rf"^@status\s+{value}\s*$",
    ]
    if status in _VERBS:
        forms.append(rf"\b{_VERBS[status]}\s+{_INVESTIGATION}")
    return re.compile("|".join(forms), re.IGNORECASE)


_PHRASES = {status: _phrases(status) for status in _VALUES}
# Code (fenced or inline) and quoted lines are what the asker pasted, not what they ask.
_PASTED = re.compile(r"(?s:```.*?(?:```|\Z))|`[^`\n]*`|^[ \t]*>[^\n]*", re.MULTILINE)
# A sentence ends at . ! ? ; before a blank, or at a line break ("v1.2" and "in_progress" end none).
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|\n")
# Before the phrase in its sentence, a negation: "don't close the investigation".
_NEGATED = re.compile(
    r"\b(?:not|never|no|don'?t|doesn'?t|didn'?t|won'?t|can'?t|cannot|shouldn'?t|mustn'?t|without)\b|n't\b",
    re.IGNORECASE,
)
# Anywhere in its sentence, a condition the model would be left to judge: "close it if the fix holds".
_CONDITIONAL = re.compile(
    r"\b(?:if|unless|once|when|whenever|after|until|whether|provided|as soon as)\b", re.IGNORECASE
)
# A sentence opening as a question about the move, not a request for it ("could you..." asks for it).
_QUESTION = re.compile(
    r"^\W*(?:why|what|who|how|did|does|do|should|shall|is|are|was|were|has|have|had)\b", re.IGNORECASE
)


def status_asked(message: str, status: str) -> bool:
    """Whether the asker's `message` asks, in so many words, for the status `status`."""
    phrase = _PHRASES.get(status)
    if phrase is None:
        return False
    for sentence in _SENTENCE_END.split(_PASTED.sub(" ", message)):
        sentence = sentence.strip()
        found = phrase.search(sentence)
        if found is None or _QUESTION.search(sentence) or _CONDITIONAL.search(sentence):
            continue
        if not _NEGATED.search(sentence[: found.start()]):
            return True
    return False
