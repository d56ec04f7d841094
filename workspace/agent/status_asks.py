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

Nothing counts inside code or a quote (a pasted log, a fenced, indented or <pre> block, text in
quotation marks), nor in a sentence that negates, questions or makes the move wait on a condition
the model would judge ("don't close the investigation", "why did you close the investigation?",
"if the fix holds, close the investigation"). The phrase must be what its clause asks: it opens the
clause (after "please", "ok", "could you" and the like: "Bob wants to close the investigation",
"stop trying to close this investigation" ask nothing) and ends it ("close the incident channel in
Slack", "mark it as closed in Jira" are about something else).
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


# What may come before the phrase in its clause: politeness, addressing, a request's "could you".
_OPENING = (
    r"^\W*(?:(?:ok|okay|so|now|then|please|kindly|thanks|agent|hey|hi)\b[\s,!.]*)*"
    r"(?:(?:can|could|would|will)\s+you\s+)?(?:please\s+)?(?:go\s+ahead\s+and\s+)?"
)
# What may come after it: the clause's end, or a word that adds nothing ("now", "please").
_CLOSING = r"(?=\s*(?:$|[,.!?;:)]|(?:now|please|for\s+me|as\s+well|too|today|thanks|thank\s+you)\b))"


def _phrases(status: str) -> re.Pattern[str]:
    value = rf"(?:{_VALUES[status]})\b"
    forms = [
        rf"{_SETTER}\s+{_STATUS_NOUN}(?:\s+(?:to|as|into)\s+|\s*:\s*){value}",
        rf"(?:mark|flag)\s+{_PRONOUN}\s+(?:as\s+)?{value}",
        rf"(?:set|move|put|switch)\s+{_PRONOUN}\s+(?:to|into|as)\s+{value}",
    ]
    if status in _VERBS:
        forms.append(rf"{_VERBS[status]}\s+{_INVESTIGATION}")
    clause = rf"{_OPENING}(?:{'|'.join(forms)}){_CLOSING}"
    return re.compile(rf"{clause}|^@status\s+{value}\s*$", re.IGNORECASE)


_PHRASES = {status: _phrases(status) for status in _VALUES}
# What the asker pasted or quoted, not what they ask: code (fenced with ``` or ~~~, closed or not,
# indented by four, in <pre>, inline), quoted lines, and text in quotation marks.
_PASTED = re.compile(
    r"(?s:```.*?(?:```|\Z))|(?s:~~~.*?(?:~~~|\Z))|(?is:<pre\b.*?(?:</pre>|\Z))|`[^`\n]*`"
    r"|^(?: {4}|\t)[^\n]*|^[ \t]*>[^\n]*|\"[^\"\n]*\"|(?<!\w)'[^'\n]+'(?!\w)",
    re.MULTILINE,
)
# Typographic apostrophes and quotation marks, read as the plain ones (U+2019 in "don't" negates too).
_TYPOGRAPHIC = str.maketrans({"\u2019": "'", "\u2018": "'", "\u201c": '"', "\u201d": '"', "\u02bc": "'"})
# A sentence ends at . ! ? ; before a blank, or at a line break ("v1.2" and "in_progress" end none).
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|\n")
# A clause of a sentence: "We fixed it, please resolve this." asks in its second.
_CLAUSE_END = re.compile(r",\s*|(?<!status):\s+|\s+(?:and|so|then)\s+", re.IGNORECASE)
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
    r"^\W*(?:why|what|who|how|did|does|do|should|shall|is|are|was|were|has|have|had|can\s+we|may|might"
    r"|would\s+(?!you\b)|could\s+(?!you\b)|will\s+(?!you\b))\b",
    re.IGNORECASE,
)


def status_asked(message: str, status: str) -> bool:
    """Whether the asker's `message` asks, in so many words, for the status `status`."""
    phrase = _PHRASES.get(status)
    if phrase is None:
        return False
    prose = _PASTED.sub(" ", message.translate(_TYPOGRAPHIC))
    for sentence in _SENTENCE_END.split(prose):
        sentence = sentence.strip()
        if _QUESTION.search(sentence) or _CONDITIONAL.search(sentence) or _NEGATED.search(sentence):
            continue
        if any(phrase.search(clause.strip()) for clause in _CLAUSE_END.split(sentence)):
            return True
    return False
