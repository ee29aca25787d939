"""Text analysis for lexical ranking: identifier splitting, stop words, stemming, synonyms.

Everything here is deterministic and dependency free. Documents and queries go through the
same :func:`analyze` so that ``listIssuesForRepo``, ``list_issues``, ``/issues/{id}`` and
"listing issues" all meet on the same terms (``list``, ``issu``).
"""

from __future__ import annotations

import re
from functools import lru_cache

_CAMEL_1 = re.compile(r"([a-z0-9])([A-Z])")  # fooBar -> foo Bar
_CAMEL_2 = re.compile(r"([A-Z]+)([A-Z](?!s\b)[a-z])")  # HTTPServer -> HTTP Server; VMs, PRs stay whole
_WORD = re.compile(r"[a-z0-9]+")
_MD_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_URL = re.compile(r"https?://\S+")
_HTML = re.compile(r"<[^>]+>")

STOP_WORDS = frozenset(
    """a an the of for to in on at by with from into onto as and or but is are was were be been
    being this that these those it its it's do does did can could should would will shall may
    might must am i me my mine myself we our us you your he she they them their there here which
    what who whom whose when where why how so than then too very just also only please want
    need needs some any each per via using use used about over under up out off if else
    let lets someone somebody something thing things one ones s t have has had another every
    everyone everything anybody anyone nobody""".split()
)

# Words that carry the *who* of an API call ("my repos", "me") rather than the *what*. They are
# stop words for the lexical fields but map onto the usual spellings of "the current user".
_SELF_WORDS = frozenset({"i", "me", "my", "mine", "myself", "own"})


def split_identifier(text: str) -> str:
    """Break camelCase / PascalCase / acronyms apart (``getHTTPStatus`` -> ``get HTTP Status``)."""
    return _CAMEL_1.sub(r"\1 \2", _CAMEL_2.sub(r"\1 \2", text))


def clean_prose(text: str) -> str:
    """Drop markdown link targets, URLs and HTML tags from a description."""
    text = _MD_LINK.sub(r"\1", text)
    text = _URL.sub(" ", text)
    return _HTML.sub(" ", text)


_SENTENCE_END = re.compile(r"(?<=[a-z0-9)\]`'\"])[.!?](?:\s|$)|\n\s*\n")
LEAD_CHARS = 160


def lead_sentence(description: str) -> str:
    """The first sentence of a description, as a stand-in summary (at most ``LEAD_CHARS``).

    Many real specs (Stripe's, Slack's, Kubernetes', most of Bitbucket's) have no ``summary``:
    their one-line purpose is the description's opening sentence ("Creates a new issue.").
    """
    text = clean_prose(description).strip()
    match = _SENTENCE_END.search(text)
    lead = text[: match.start() + 1] if match else text
    lead = " ".join(lead.split()).rstrip(".")
    if len(lead) > LEAD_CHARS:
        lead = lead[:LEAD_CHARS].rsplit(" ", 1)[0] + " ..."
    return lead


def words(text: str) -> list[str]:
    """Lower-case alphanumeric words after identifier splitting (``_``, ``-``, ``/`` separate)."""
    return _WORD.findall(split_identifier(text).lower())


_VOWELS = set("aeiouy")


def _has_vowel(s: str) -> bool:
    return any(c in _VOWELS for c in s)


_ADVERB_ENDINGS = ("ally", "ently", "antly", "ously", "ively", "fully", "lessly", "ately")


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """A light English stemmer: plurals, -ed, -ing and a trailing -e.

    Aggressive enough that ``repositories``/``repository``, ``merging``/``merged``/``merge``
    and ``labels``/``labeled`` collide; cautious with short words and numbers.
    """
    w = word
    if len(w) <= 3 or not w.isalpha():
        return w
    if w.endswith("ies") and len(w) > 4:
        w = w[:-3] + "y"
    elif w.endswith("sses"):
        w = w[:-2]
    elif w.endswith("es") and (w[-3] in "sxz" or w[-4:-2] in ("ch", "sh")) and len(w) > 4:
        w = w[:-2]
    elif w.endswith("s") and not w.endswith(("ss", "us", "is", "ous")):
        w = w[:-1]
    if w.endswith(_ADVERB_ENDINGS):  # currently -> current, partially -> partial
        w = w[:-2]
    for suffix in ("ing", "ed"):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3 and _has_vowel(w[: -len(suffix)]):
            w = w[: -len(suffix)]
            if len(w) > 3 and w[-1] == w[-2] and w[-1] not in "lsz":  # stopped -> stop
                w = w[:-1]
            break
    if w.endswith("ee") and len(w) - 2 >= 5:  # assignee -> assign
        w = w[:-2]
    elif w.endswith("ript") and len(w) >= 8:  # transcript -> transcrib(e), like transcription
        w = w[:-3] + "ib"
    elif w.endswith("ription"):  # subscription -> subscrib(e), description -> describ(e)
        w = w[:-5] + "b"
    elif w.endswith("ion") and len(w) >= 7 and w[-4] in "ts":  # protection -> protect
        w = w[:-3]
    elif w.endswith("ment") and len(w) - 4 >= 5:  # deployment -> deploy
        w = w[:-4]
    elif w.endswith(("er", "or")) and len(w) - 2 >= 5 and w[-3] not in _VOWELS:  # reviewer -> review
        w = w[:-2]
    if w.endswith("y") and len(w) > 3 and w[-2] not in _VOWELS:
        w = w[:-1] + "i"  # repository / repositori(es) -> repositori
    if w.endswith("e") and len(w) > 3:
        w = w[:-1]
    if w.endswith("at") and len(w) >= 6:  # invitat(ion) / invit(e), configurat(ion) / configur(e)
        w = w[:-2]
    return w


# Abbreviations rewritten to their full word on both sides (documents and queries).
ABBREVIATIONS: dict[str, str] = {
    "repo": "repository", "repos": "repositories", "org": "organization", "orgs": "organizations",
    "config": "configuration", "configs": "configurations", "info": "information",
    "admin": "administrator", "admins": "administrators", "env": "environment",
    "envs": "environments", "msg": "message", "msgs": "messages", "auth": "authentication",
    "perm": "permission", "perms": "permissions", "desc": "description", "stat": "statistic",
    "stats": "statistics", "attr": "attribute", "attrs": "attributes", "pref": "preference",
    "prefs": "preferences", "img": "image", "pic": "picture", "doc": "document",
    "docs": "documents", "notif": "notification", "notifs": "notifications",
}


def analyze(text: str, *, keep_stop_words: bool = False, phrases: bool = False) -> list[str]:
    """Text -> stemmed terms (stop words dropped unless asked to keep them).

    With ``phrases``, the two-word expressions that read the same in prose and in a request
    ("logged in", "turn off") are rewritten as the query side rewrites them, so the
    description "Returns the currently logged in user" meets "who am I signed in as".
    """
    out = []
    for w in (_rewrite_bigrams(words(text), PROSE_BIGRAMS) if phrases else words(text)):
        if not keep_stop_words and w in STOP_WORDS:
            continue
        out.append(stem(ABBREVIATIONS.get(w, w)))
    return out


# --- synonyms -------------------------------------------------------------------------------
# Each group lists words an API user treats as interchangeable when looking for an operation.
# Groups are directional-free: every member expands to the others with a reduced weight.
SYNONYM_GROUPS: tuple[tuple[str, ...], ...] = (
    ("get", "fetch", "retrieve", "read", "show", "view", "see", "display", "look", "lookup",
     "find", "detail", "details", "info", "information", "describe", "check"),
    ("list", "all", "enumerate", "browse", "index", "overview"),
    ("create", "add", "new", "open", "make", "post", "insert", "register", "submit",
     "start", "generate", "write", "publish", "leave", "give", "send", "setup", "provision"),
    ("delete", "remove", "destroy", "erase", "drop", "discard", "purge", "revoke", "kick",
     "uninstall", "clear", "take"),
    ("update", "edit", "change", "modify", "patch", "alter", "rename", "set", "replace",
     "configure", "adjust", "put", "save"),
    ("move", "transition", "transfer", "status", "state", "progress", "resolve", "close",
     "reopen", "done", "complete", "finish", "archive", "promote"),
    ("search", "find", "query", "filter", "lookup", "match", "mention", "mentions"),
    ("cancel", "abort", "stop", "halt", "terminate", "kill", "shutdown"),
    ("resume", "unpause", "continue"),
    ("restore", "revert", "rollback", "undo"),
    ("run", "execute", "trigger", "dispatch", "launch", "invoke", "rerun", "start"),
    ("download", "export", "archive", "zip", "tarball", "zipball", "fetch"),
    ("upload", "import", "attach"),
    ("enable", "activate", "turn", "allow"),
    ("disable", "deactivate", "off", "suspend", "block"),
    ("comment", "reply", "note", "message", "discussion", "conversation"),
    ("user", "account", "person", "people", "member", "profile", "login", "username",
     "collaborator", "contributor"),
    ("issue", "ticket", "bug", "defect", "problem", "incident", "task"),
    ("organization", "org", "company", "enterprise"),
    ("repository", "repo", "project", "codebase"),
    ("label", "tag", "tags", "topic", "category"),
    ("assign", "assignee", "assigned", "owner", "responsible"),
    ("invite", "invitation", "join"),
    ("error", "fail", "failed", "failure", "broken"),
    ("permission", "access", "role", "privilege", "grant"),
    ("key", "token", "credential", "secret"),
    ("webhook", "hook", "callback", "notification", "subscription"),
    ("count", "number", "total", "stats", "statistic", "statistics", "metric", "many", "traffic"),
    ("history", "log", "logs", "timeline", "events", "activity", "audit"),
    ("merge", "combine", "integrate", "sync", "synchronize"),
    ("copy", "duplicate", "clone", "fork"),
    ("approve", "accept", "confirm"),
    ("reject", "decline", "deny", "dismiss"),
    ("file", "content", "contents", "document", "blob"),
    ("release", "version", "ship"),
    ("deploy", "deployment", "rollout", "release"),
    ("follow", "watch", "subscribe", "star"),
    ("unfollow", "unwatch", "unsubscribe", "unstar"),
    ("email", "mail", "address"),
    ("picture", "image", "avatar", "photo"),
    ("remaining", "left", "quota", "limit", "rate"),
    ("authenticated", "current", "viewer", "me", "whoami"),
)

# Verbs whose effect is a state change: APIs usually do these with an update operation
# ("close an issue" = PATCH the issue with state=closed), so they also imply "update".
STATE_CHANGE = ("move", "transition", "close", "reopen", "resolve", "done", "complete",
                "finish", "archive", "unarchive", "lock", "mark", "rename", "promote")
IMPLIED_WEIGHT = 0.35
IMPLIED_TERMS = ("update", "edit", "change", "modify", "patch")

# Two-word expressions rewritten before analysis (query side).
BIGRAMS: dict[tuple[str, str], tuple[str, ...]] = {
    ("turn", "off"): ("disable",), ("switch", "off"): ("disable",),
    ("turn", "on"): ("enable",), ("switch", "on"): ("enable",),
    ("set", "up"): ("setup",), ("sign", "up"): ("register",),
    ("log", "in"): ("authenticated",), ("logged", "in"): ("authenticated",),
    ("sign", "in"): ("authenticated",), ("signed", "in"): ("authenticated",),
    ("look", "up"): ("lookup",), ("up", "to"): ("update",),
    ("get", "rid"): ("delete",), ("how", "many"): ("count",),
    ("shut", "down"): ("shutdown",), ("power", "off"): ("shutdown",), ("roll", "back"): ("rollback",),
}

# The expressions above that mean the same in an API's prose (not "up to", "how many").
PROSE_BIGRAMS: dict[tuple[str, str], tuple[str, ...]] = {
    pair: out for pair, out in BIGRAMS.items()
    if out[0] in ("disable", "enable", "authenticated", "setup", "register")
}

_PROSE_FIRST = frozenset(first for first, _ in PROSE_BIGRAMS)

# Multi-word expansions for abbreviations (query side only): "pr" means "pull request".
PHRASES: dict[str, tuple[str, ...]] = {
    "pr": ("pull", "request"),
    "prs": ("pull", "request"),
    "ci": ("check", "status", "workflow"),
    "2fa": ("two", "factor"),
    "ssh": ("ssh", "key"),
    "gpg": ("gpg", "key"),
}

SELF_TERMS: tuple[str, ...] = tuple(stem(w) for w in ("authenticated", "current", "viewer", "me"))


def _build_synonyms() -> dict[str, dict[str, float]]:
    table: dict[str, dict[str, float]] = {}
    for group in SYNONYM_GROUPS:
        stems = {stem(w) for w in group}
        for s in stems:
            alts = table.setdefault(s, {})
            for other in stems - {s}:
                alts[other] = max(alts.get(other, 0.0), SYNONYM_WEIGHT)
    implied = {stem(w) for w in IMPLIED_TERMS}
    for word in STATE_CHANGE:
        alts = table.setdefault(stem(word), {})
        for other in implied:
            alts.setdefault(other, IMPLIED_WEIGHT)
    return table


def _query_words(query: str) -> list[str]:
    """Query words with two-word expressions rewritten."""
    return _rewrite_bigrams(words(query), BIGRAMS)


def _rewrite_bigrams(raw: list[str], table: dict[tuple[str, str], tuple[str, ...]]) -> list[str]:
    if table is PROSE_BIGRAMS and _PROSE_FIRST.isdisjoint(raw):  # most descriptions: nothing to do
        return raw
    out: list[str] = []
    i = 0
    while i < len(raw):
        pair = table.get((raw[i], raw[i + 1])) if i + 1 < len(raw) else None
        if pair:
            out.extend(pair)
            i += 2
            if pair == ("update",) and raw[i : i + 1] == ["date"]:  # "up to date"
                i += 1
            continue
        out.append(raw[i])
        i += 1
    return out


def _is_plural(word: str) -> bool:
    """A plural noun ("issues", "repos"), not "status" or "access", nor a word that asks for
    one thing's particulars ("the details of a VM")."""
    return (len(word) > 3 and word.endswith("s") and not word.endswith("ss") and stem(word) != word
            and stem(word) not in _GET_TERMS)


def query_concepts(query: str, vocabulary: frozenset[str] | dict = frozenset(),
                   acronyms: dict[str, tuple[str, ...]] | None = None) -> list[tuple[str, dict[str, float]]]:
    """Split a query into concepts, each a primary term plus weighted alternatives.

    ``"remove a PR"`` -> ``[("remov", {"remov": 1, "delet": .5, ...}), ("pull", ...),
    ("request", ...)]``. Each concept contributes at most once to a document's score.
    ``acronyms`` (from the spec: ``vm`` -> virtual machine) spell out the initials of the
    spec's compound names.
    """
    acronyms = acronyms or {}
    concepts: list[tuple[str, dict[str, float]]] = []
    seen: set[str] = set()
    self_ref = plural = False
    for w in _query_words(query):
        if w in _SELF_WORDS:
            self_ref = True
            continue
        if w in STOP_WORDS or w.isdigit():  # "issue 12", "$20": a value, not a search word
            continue
        plural = plural or _is_plural(w)
        w = ABBREVIATIONS.get(w, w)
        # an un-verb leads a task ("unassign a user"); elsewhere it is a state ("my unread mail")
        negated = (not concepts and w.startswith("un") and len(w) > 5
                   and (stem(w) not in vocabulary or stem(w[2:]) in vocabulary))
        parts = PHRASES.get(w) or acronyms.get(w)
        if parts is None and w.endswith("s") and w[:-1] in acronyms:  # "VMs"
            parts, plural = acronyms[w[:-1]], True
        for part in parts or (w,):
            term = stem(part)
            if term in seen:
                continue
            seen.add(term)
            same = next((a for _, a in concepts if a.get(term) == SYNONYM_WEIGHT), None)
            if same is not None:  # "look up a user's profile": user and profile are one concept
                same[term] = 1.0
                for syn, weight in SYNONYMS.get(term, {}).items():
                    same.setdefault(syn, weight)
                continue
            alts = {term: 1.0}
            if negated:  # "unassign" -> "assign" (+ a "remove" concept below)
                alts[stem(w[2:])] = NEGATED_WEIGHT
            for syn, weight in SYNONYMS.get(term, {}).items():
                alts.setdefault(syn, weight)
            concepts.append((term, alts))
        remove = stem("remove")
        if negated and remove not in seen:
            seen.add(remove)
            alts = {s: NEGATED_WEIGHT * w for s, w in SYNONYMS[remove].items()}
            concepts.append((remove, {**alts, remove: NEGATED_WEIGHT}))
    listing = stem("list")
    if plural and listing not in seen:  # "open issues in the repo": a collection is wanted
        concepts.append((listing, {listing: PLURAL_WEIGHT}))
    if self_ref and SELF_TERMS[0] not in seen:
        concepts.append((SELF_TERMS[0], {t: SELF_WEIGHT for t in SELF_TERMS}))
    return concepts


SYNONYM_WEIGHT = 0.5
SELF_WEIGHT = 0.35
PLURAL_WEIGHT = 0.3
NEGATED_WEIGHT = 0.8
SYNONYMS: dict[str, dict[str, float]] = _build_synonyms()
_GET_TERMS = frozenset(stem(w) for w in SYNONYM_GROUPS[0])
