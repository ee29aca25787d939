"""BM25F ranking over operation fields, with query-side synonym concepts.

Each operation is a document with several fields (operationId, summary, description, path,
tags, HTTP-method verbs). A term's frequency is combined across fields with per-field weights
and length normalisation (BM25F), then saturated once. Because document lengths are fixed, the
per-(term, document) impact is precomputed at build time and a query is a few dictionary walks.

A query is a list of *concepts* (a word plus its synonyms, see :func:`text.query_concepts`);
a concept contributes the best of its alternatives, so synonyms widen recall without
double counting. Dividing by the score of an ideal document that matches every concept with
its primary word gives a similarity in [0, 1] that is comparable across queries.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from .spec import Operation
from .text import ABBREVIATIONS, STOP_WORDS, analyze, clean_prose, lead_sentence, query_concepts, stem, words

METHOD_VERBS = {
    "GET": "get list read",
    "POST": "create add",
    "PUT": "update set replace",
    "PATCH": "update edit",
    "DELETE": "delete remove",
}


@dataclass(frozen=True)
class FieldSpec:
    weight: float
    b: float  # length normalisation strength


DEFAULT_FIELDS: dict[str, FieldSpec] = {
    "opid": FieldSpec(2.5, 0.5),
    "summary": FieldSpec(3.0, 0.5),
    "description": FieldSpec(0.2, 0.75),
    "path": FieldSpec(1.0, 0.4),
    "params": FieldSpec(0.25, 0.5),
    "fields": FieldSpec(0.3, 0.75),
    "tags": FieldSpec(1.0, 0.3),
    "verb": FieldSpec(0.6, 0.0),
}
K1 = 2.0  # BM25 saturation; 1.2 -> 2.0 measured on the dev sets (README)
DESCRIPTION_CHARS = 400  # only the start of a description is indexed; the rest is mostly noise


def operation_fields(op: Operation) -> dict[str, list[str]]:
    """The analysed terms of each indexed field of an operation."""
    opid = op.operation_id.split(":", 1)[-1] if op.api else op.operation_id
    static, params = [], []
    for seg in op.path.split("/"):
        (params if seg.startswith("{") else static).append(seg)
    desc = clean_prose(op.own_text)[:DESCRIPTION_CHARS]
    return {
        "opid": [] if op.synthesized_id else analyze(opid),
        "summary": analyze(summary_of(op), phrases=True),
        "description": analyze(desc, phrases=True),
        "path": analyze(" ".join(static), keep_stop_words=True),  # keeps /users/me
        "params": analyze(" ".join(params)),
        "fields": analyze(" ".join(input_names(op))),
        "tags": analyze(" ".join(op.tags)),
        "verb": analyze(intent_words(op.method, op.path)),
    }


def intent_words(method: str, path: str) -> str:
    """What a caller means by an operation, from its method and the shape of its path.

    ``GET /pets`` lists (a collection: the path ends in a static, plural-looking segment);
    ``GET /pets/{id}`` gets one item; ``POST`` to a collection creates; an action segment after
    an item (``POST /pulls/{n}/merge``) is left to the path field. An RPC-style path
    (``POST /chat.delete``) has no intent from its method.
    """
    segments = [seg for seg in path.split("/") if seg]
    last = segments[-1] if segments else ""
    item = last.startswith("{")
    if "." in last.strip(".") and not item:
        # RPC style (/chat.postMessage, /conversations.list): the name says what the call
        # does, and the method is whatever the API uses for every read or every write
        return ""
    if method == "GET":
        if item:
            return "get read"
        return "list get" if last.endswith("s") or "list" in last.lower() else "get read"
    if method == "POST":
        if item:  # POST /customers/{id}: an update where an API uses POST for every write
            return "update edit"
        after_item = len(segments) > 1 and segments[-2].startswith("{") and not item
        return "create add" if not after_item or last.endswith("s") else "create"
    return METHOD_VERBS.get(method, method.lower())


def summary_of(op: Operation) -> str:
    """The operation's summary, or the first sentence of its description when it has none."""
    return op.summary or lead_sentence(op.own_text)


def input_names(op: Operation) -> list[str]:
    """Names a caller fills in: non-path parameters, top-level body properties, and their
    string enum values (``state: open|closed`` is how "close an issue" is spelled)."""
    out: list[str] = []

    def add(name: str, schema: object) -> None:
        out.append(name)
        if isinstance(schema, dict) and isinstance(schema.get("enum"), list):
            out.extend(str(v) for v in schema["enum"][:12] if isinstance(v, str) and v != "...")

    for p in op.parameters:
        if p.get("in") != "path":
            add(str(p.get("name", "")), p.get("schema"))
    schema = (op.request_body or {}).get("schema")
    if isinstance(schema, dict):
        props = dict(schema.get("properties") or {})
        for part in schema.get("allOf") or []:
            if isinstance(part, dict):
                props.update(part.get("properties") or {})
        for name, sub in props.items():
            add(name, sub)
    return out


COMPOUND_FIELDS = ("opid", "path", "params")
COMPOUND_MIN = 7  # letters; shorter identifiers are rarely two words run together


def _word_term(word: str) -> str | None:
    """What :func:`analyze` makes of one lower-case word (None for a stop word)."""
    return None if word in STOP_WORDS else stem(ABBREVIATIONS.get(word, word))


def split_compounds(docs: list[dict[str, list[str]]]) -> dict[str, tuple[str, str]]:
    """Add the two words of run-together identifiers (``pullrequests``, ``statefulsets``,
    ``repo_slug`` is already split) to the identifier fields, in place.

    A term is split when both halves are terms this spec uses elsewhere, so the words come
    from the spec itself; returns the splits made (for tests and inspection).
    """
    vocab: set[str] = set()  # words the spec's identifiers use on their own
    for d in docs:
        for f in (*COMPOUND_FIELDS, "tags", "fields"):
            vocab.update(d[f])
    splits: dict[str, tuple[str, str]] = {}
    for term in sorted(vocab):
        if len(term) < COMPOUND_MIN or not term.isalpha():
            continue
        for i in range(3, len(term) - 2):
            head = _word_term(term[:i])
            if head is None or head not in vocab:
                continue
            tail = _word_term(term[i:])
            if tail is not None and tail in vocab:
                splits[term] = (head, tail)
                break
    if splits:
        for d in docs:
            for f in COMPOUND_FIELDS:
                extra = [part for t in d[f] if t in splits for part in splits[t]]
                d[f] = d[f] + extra
    return splits


REVERSAL_FIELDS = ("opid", "summary", "path")


def mark_reversals(docs: list[dict[str, list[str]]]) -> set[str]:
    """Add ``remove`` next to un-words that undo a verb of the same spec (``unstar``,
    ``unlock``, ``unassign``), in place, so "remove my star" finds the unstar operation."""
    names = {t for d in docs for f in ("opid", "path") for t in d[f]}  # the spec's verbs and nouns
    used = {t for d in docs for f in REVERSAL_FIELDS for t in d[f]}
    undo = {t for t in used if t.startswith("un") and len(t) > 5 and t[2:] in names}
    remove = stem("remove")
    for d in docs:
        for f in REVERSAL_FIELDS:
            if any(t in undo for t in d[f]):
                d[f] = d[f] + [remove]
    return undo


SUPERSEDED_FACTOR = 0.9
_VERSION_SEGMENT = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")
_STAGES = {"alpha": 0, "beta": 1, None: 2}


def superseded_copies(operations: Sequence[Operation]) -> set[int]:
    """Operations that an API also serves under a more stable version of the same path.

    ``PUT /apis/x.io/v1alpha3/.../start`` and ``PUT /apis/x.io/v1/.../start`` are one
    operation; the stable copy is the answer and the older one only crowds the top results,
    so it ranks just below (v2 > v1 > v1beta2 > v1beta1 > v1alpha1).
    """
    groups: dict[tuple[str, ...], list[tuple[tuple[int, int, int], int]]] = {}
    for doc, op in enumerate(operations):
        segments = op.path.split("/")
        for i, seg in enumerate(segments):
            m = _VERSION_SEGMENT.match(seg)
            if m:
                key = (op.method, *segments[:i], "{version}", *segments[i + 1:])
                rank = (int(m.group(1)), _STAGES[m.group(2)], int(m.group(3) or 0))
                groups.setdefault(key, []).append((rank, doc))
                break
    out: set[int] = set()
    for copies in groups.values():
        if len(copies) > 1:
            best = max(rank for rank, _ in copies)
            out.update(doc for rank, doc in copies if rank < best)
    return out


ACRONYM_MAX_SHARE = 0.01
_COMPOUND_NAME = re.compile(r"(?:[A-Z][a-z]+){2,}")
_NAME_WORD = re.compile(r"[A-Z][a-z]+")


def acronyms(operations: Sequence[Operation]) -> dict[str, tuple[str, ...]]:
    """Initials of the compound names in the spec's operationIds -> their words.

    ``listNamespacedVirtualMachineInstance`` makes ``vm`` -> (virtual, machine) and ``vmi`` ->
    (virtual, machine, instance); Kubernetes' ``PersistentVolumeClaim`` makes ``pvc``. An
    initialism counts when two operations use it; when several compounds share one, the one
    most operations use wins, and a tie drops it. Initials that are already a word of
    the spec (``set``, ``pod``) are left alone, so only unknown query words are spelled out.
    """
    counts: Counter[tuple[str, ...]] = Counter()
    vocab: set[str] = set()
    for op in operations:
        if op.synthesized_id:
            continue
        vocab.update(words(op.operation_id))
        found: set[tuple[str, ...]] = set()
        for run in _COMPOUND_NAME.findall(op.operation_id):
            names = [w.lower() for w in _NAME_WORD.findall(run)]
            for size in range(2, min(4, len(names)) + 1):
                for i in range(len(names) - size + 1):
                    found.add(tuple(names[i:i + size]))
        counts.update(found)
    best: dict[str, tuple[int, tuple[str, ...] | None]] = {}
    for names, n in sorted(counts.items()):
        if n < 2:
            continue
        key = "".join(w[0] for w in names)
        if key in STOP_WORDS or key in vocab:
            continue
        held = best.get(key)
        if held is None or n > held[0]:
            best[key] = (n, names)
        elif n == held[0]:
            best[key] = (n, None)
    return {k: names for k, (n, names) in best.items() if names is not None}


class LexicalIndex:
    """Precomputed BM25F impacts: ``term -> {doc: impact}`` with impact <= idf(term)."""

    def __init__(self, operations: Sequence[Operation], fields: dict[str, FieldSpec] | None = None,
                 k1: float = K1) -> None:
        self.fields = dict(fields or DEFAULT_FIELDS)
        self.k1 = k1
        self.size = len(operations)
        docs = [operation_fields(op) for op in operations]
        split_compounds(docs)
        mark_reversals(docs)
        found = acronyms(operations)
        avg = {f: (sum(len(d[f]) for d in docs) / max(1, len(docs))) or 1.0 for f in self.fields}
        df: Counter[str] = Counter()
        pseudo_tf: list[dict[str, float]] = []
        for d in docs:
            acc: dict[str, float] = {}
            for f, spec in self.fields.items():
                terms = d[f]
                if not terms:
                    continue
                norm = 1.0 - spec.b + spec.b * len(terms) / avg[f]
                for term, tf in Counter(terms).items():
                    acc[term] = acc.get(term, 0.0) + spec.weight * tf / norm
            df.update(acc.keys())
            pseudo_tf.append(acc)
        n = self.size
        self.idf = {t: math.log(1.0 + (n - c + 0.5) / (c + 0.5)) for t, c in df.items()}
        self.unseen_idf = math.log(1.0 + (n + 0.5) / 0.5)
        self.postings: dict[str, dict[int, float]] = {}
        for doc_id, acc in enumerate(pseudo_tf):
            for term, tf in acc.items():
                impact = self.idf[term] * tf / (k1 + tf)
                self.postings.setdefault(term, {})[doc_id] = impact
        # an initialism the spec's prose uses widely is an English word ("all"), not a name
        rare = max(2.0, ACRONYM_MAX_SHARE * n)
        self.acronyms = {k: v for k, v in found.items() if len(self.postings.get(stem(k), ())) <= rare}
        self.superseded = superseded_copies(operations)

    def score(self, query: str) -> tuple[dict[int, float], float]:
        """Raw scores of matching documents and the ideal score used for normalisation."""
        totals: dict[int, float] = {}
        ideal = 0.0
        for primary, alts in query_concepts(query, self.postings, self.acronyms):
            best: dict[int, float] = {}
            # the words the user said (the primary, and words of the same synonym group)
            said = [t for t, w in alts.items() if w >= 1.0 or t == primary]
            concept_max = max(self.idf.get(t, self.unseen_idf) for t in said)
            # the cap on synonyms: the rarest said word the spec has ("get the details": get's
            # idf, not the unseen "details"'s); only when it has none may a synonym stand in fully
            cap = max((self.idf[t] for t in said if t in self.idf), default=concept_max)
            for term, weight in alts.items():
                postings = self.postings.get(term)
                if not postings:
                    continue
                if weight < 1.0:
                    # a rarer synonym must not outweigh the word the user said: "create"
                    # is common, "setup" rare, and get-setup is no answer to "create a repo"
                    weight *= min(1.0, cap / self.idf[term])
                for doc, impact in postings.items():
                    value = impact * weight
                    if value > best.get(doc, 0.0):
                        best[doc] = value
            ideal += concept_max
            for doc, value in best.items():
                totals[doc] = totals.get(doc, 0.0) + value
        return totals, ideal

    def search(self, query: str, limit: int) -> list[tuple[int, float]]:
        """Top ``limit`` (doc index, similarity in [0, 1]) pairs, best first."""
        totals, ideal = self.score(query)
        if not totals or ideal <= 0:
            return []
        for doc in self.superseded.intersection(totals):
            totals[doc] *= SUPERSEDED_FACTOR
        top = sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
        return [(doc, min(1.0, s / ideal)) for doc, s in top]

    def vocabulary_size(self) -> int:
        return len(self.postings)


def query_has_terms(query: str) -> bool:
    """False when a query has no searchable word at all (only punctuation or stop words)."""
    return any(True for _ in words(query))
