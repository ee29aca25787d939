from __future__ import annotations

from mcpkit_openapi.text import analyze, query_concepts, split_identifier, stem, words


def test_identifier_splitting() -> None:
    assert split_identifier("getHTTPStatusCode") == "get HTTP Status Code"
    assert words("listIssuesForRepo") == ["list", "issues", "for", "repo"]
    assert words("issues/list-for-repo") == ["issues", "list", "for", "repo"]
    assert words("/repos/{owner}/{repo}/git_refs") == ["repos", "owner", "repo", "git", "refs"]


def test_stemming_collapses_inflections() -> None:
    groups = [
        ("repository", "repositories"), ("merge", "merged", "merging"), ("label", "labels", "labeled"),
        ("branch", "branches"), ("status", "statuses"), ("create", "created", "creation"),
        ("protect", "protection"), ("deploy", "deployment"), ("review", "reviewer", "reviewers"),
        ("invite", "invitation"), ("assign", "assignee", "assignees"), ("run", "running", "runs"),
    ]
    for group in groups:
        assert len({stem(w) for w in group}) == 1, group
    assert stem("user") != stem("us") and stem("news") == "new"
    assert stem("v2") == "v2" and stem("get") == "get"


def test_analyze_drops_stop_words_and_expands_abbreviations() -> None:
    assert analyze("Get a repo of the org") == analyze("get repository organization")


def test_query_concepts_synonyms_bigrams_and_negation() -> None:
    concepts = dict(query_concepts("remove a label"))
    assert concepts[stem("remove")][stem("delete")] < 1.0
    assert stem("label") in concepts
    disable = [p for p, _ in query_concepts("turn off the workflow")]
    assert stem("disable") in disable and stem("turn") not in disable
    pr = [p for p, _ in query_concepts("merge my PR")]
    assert pr[:3] == [stem("merge"), "pull", stem("request")]
    assert stem("authenticated") in pr  # "my" refers to the current user
    neg = dict(query_concepts("unassign a user", vocabulary={"assign": {}}))
    assert stem("assign") in neg["unassign"] and stem("remove") in neg
    close = dict(query_concepts("close an issue"))
    assert stem("update") in close[stem("close")]  # state changes imply an update
    assert query_concepts("the of and") == []


def test_adverbs_and_prose_phrases_meet_the_query_side() -> None:
    assert stem("currently") == stem("current") and stem("partially") == stem("partial")
    assert stem("only") != stem("on") and stem("assembly") != stem("assemble")
    doc = analyze("Returns the currently logged in user.", phrases=True)
    assert stem("authenticated") in doc and stem("current") in doc
    assert [p for p, _ in query_concepts("who am I signed in as")][0] == stem("authenticated")
    assert stem("update") not in analyze("returns up to 100 items", phrases=True)


def test_run_together_identifiers_split_on_the_specs_own_words() -> None:
    from mcpkit_openapi.lexical import split_compounds

    empty = {f: [] for f in ("opid", "summary", "description", "path", "params", "fields", "tags", "verb")}
    docs = [
        {**empty, "path": analyze("repositories pullrequests"), "summary": analyze("comment")},
        {**empty, "opid": analyze("getPull"), "tags": analyze("request")},
        {**empty, "path": analyze("comments")},
    ]
    splits = split_compounds(docs)
    assert splits[stem("pullrequests")] == ("pull", stem("request"))
    assert {"pull", stem("request")} <= set(docs[0]["path"])
    assert stem("comments") not in splits  # "com" and "ment" are not words of these identifiers


def test_un_words_that_undo_a_spec_verb_also_mean_remove() -> None:
    from mcpkit_openapi.lexical import mark_reversals

    empty = {f: [] for f in ("opid", "summary", "description", "path", "params", "fields", "tags", "verb")}
    docs = [{**empty, "opid": analyze("unstarRepo")}, {**empty, "opid": analyze("starRepo")},
            {**empty, "summary": analyze("unless told otherwise")}]
    assert mark_reversals(docs) == {"unstar"}
    assert stem("remove") in docs[0]["opid"] and stem("remove") not in docs[1]["opid"] + docs[2]["summary"]
    # query side: "unassign" reads as assign + remove even when the spec also spells "unassign"
    concepts = dict(query_concepts("unassign a user", vocabulary={"assign": {}, "unassign": {}}))
    assert stem("assign") in concepts["unassign"] and stem("remove") in concepts


def test_intent_from_method_and_path_shape() -> None:
    from mcpkit_openapi.lexical import intent_words

    assert intent_words("GET", "/repos/{owner}/issues") == "list get"
    assert intent_words("POST", "/v1/customers/{customer}") == "update edit"  # POST-only APIs
    assert intent_words("POST", "/v1/customers") == "create add"
    assert intent_words("POST", "/chat.delete") == ""  # RPC style: the name carries the intent
    assert intent_words("GET", "/conversations.list") == ""


def test_a_rare_synonym_never_outweighs_the_word_the_user_said() -> None:
    from mcpkit_openapi.lexical import LexicalIndex
    from mcpkit_openapi.spec import Operation

    ops = [Operation(f"things/create-{i}", "POST", f"/things{i}", summary=f"Create a thing {i}") for i in range(30)]
    ops.append(Operation("repos/create", "POST", "/repos", summary="Create a repository"))
    ops.append(Operation("repos/get-setup", "GET", "/repos/{repo}/setup", summary="Get the setup of a repository"))
    index = LexicalIndex(ops)
    top = [ops[doc].operation_id for doc, _ in index.search("create a repository", 2)]
    assert top[0] == "repos/create"


def test_words_of_one_synonym_group_make_one_concept() -> None:
    concepts = query_concepts("look up a user's profile by their login")
    merged = [alts for _, alts in concepts if stem("user") in alts]
    assert len(merged) == 1  # a doc saying "profile" is not counted three times
    assert merged[0][stem("profile")] == merged[0][stem("login")] == 1.0
    assert stem("subscription") == stem("subscribe") and stem("description") == stem("describe")


def test_a_plural_object_asks_lightly_for_a_collection() -> None:
    plural = dict(query_concepts("show open issues in the repo"))
    assert plural[stem("list")] == {stem("list"): 0.3}
    for query in ("close the issue", "check the status", "grant access"):
        assert stem("list") not in dict(query_concepts(query)), query


def test_possessive_and_contraction_letters_are_not_terms() -> None:
    assert analyze("the user's profile; don't") == analyze("user profile don")
    assert [p for p, _ in query_concepts("a user's repository")] == [stem("user"), stem("repository")]


def test_an_un_word_is_a_removal_only_where_it_leads_the_task() -> None:
    vocabulary = {"read": {}, "unread": {}}
    assert stem("remove") not in dict(query_concepts("check my unread notifications", vocabulary))
    assert stem("remove") in dict(query_concepts("unread this thread", vocabulary))


def test_numbers_in_a_query_are_values_not_search_words() -> None:
    assert [p for p, _ in query_concepts("close issue 12")] == [stem("close"), stem("issue")]
    assert [p for p, _ in query_concepts("enable 2fa")][-2:] == ["two", "factor"]


def test_initials_of_the_specs_compound_names_are_spelled_out() -> None:
    from mcpkit_openapi.lexical import LexicalIndex
    from mcpkit_openapi.spec import Operation

    ops = [Operation("listNamespacedVirtualMachine", "GET", "/vms", description="All of them."),
           Operation("startVirtualMachine", "PUT", "/vms/{name}/start"),
           Operation("readPersistentVolumeClaim", "GET", "/pvcs/{name}", description="All claims."),
           Operation("listAccountLoginLinks", "GET", "/links", description="All links."),
           Operation("createAccountLoginLink", "POST", "/links", description="Makes one, all done.")]
    index = LexicalIndex(ops)
    assert index.acronyms["vm"] == ("virtual", "machine")
    assert "pvc" not in index.acronyms  # one operation is not a pattern
    assert "all" not in index.acronyms  # a word the spec's prose uses is not spelled out
    best = index.search("start my VM", 5)[0][0]
    assert ops[best].operation_id == "startVirtualMachine"
    concepts = [c for c, _ in query_concepts("stop the VMs", {}, index.acronyms)]
    assert concepts[:3] == ["stop", "virtual", "machin"] and "list" in concepts  # plural


def test_a_copy_under_an_older_api_version_ranks_below_the_stable_one() -> None:
    from mcpkit_openapi.lexical import LexicalIndex, superseded_copies
    from mcpkit_openapi.spec import Operation

    ops = [Operation("v1alpha3Start", "PUT", "/apis/x.io/v1alpha3/vms/{name}/start", summary="Start a VM"),
           Operation("v1beta1Start", "PUT", "/apis/x.io/v1beta1/vms/{name}/start", summary="Start a VM"),
           Operation("v1Start", "PUT", "/apis/x.io/v1/vms/{name}/start", summary="Start a VM"),
           Operation("v1Stop", "PUT", "/apis/x.io/v1/vms/{name}/stop", summary="Stop a VM"),
           Operation("startProfiler", "GET", "/v1/start-profiler", summary="Start the profiler")]
    assert superseded_copies(ops) == {0, 1}
    ranked = [ops[d].operation_id for d, _ in LexicalIndex(ops).search("start a VM", 5)]
    assert ranked[0] == "v1Start" and {"v1beta1Start", "v1alpha3Start"} <= set(ranked[1:])


def test_asking_for_details_is_not_a_plural_object_and_caps_synonyms_by_the_known_word() -> None:
    from mcpkit_openapi.lexical import LexicalIndex
    from mcpkit_openapi.spec import Operation

    assert "list" not in [c for c, _ in query_concepts("get the details of one machine")]
    assert "list" in [c for c, _ in query_concepts("get the machines")]
    ops = [Operation("readMachine", "GET", "/machines/{name}", summary="Get a Machine object"),
           Operation("fetchCertChain", "GET", "/machines/{name}/cert", summary="Fetch a certificate of a machine")]
    ops += [Operation(f"getThing{i}", "GET", f"/things{i}/{{id}}", summary=f"Get a thing {i}") for i in range(8)]
    # "details" is no word of this spec: the rare synonym "fetch" must still count no more than "get"
    ranked = [ops[d].operation_id for d, _ in LexicalIndex(ops).search("get the details of one machine", 3)]
    assert ranked[0] == "readMachine"


def test_shut_down_resume_and_roll_back() -> None:
    def alts(q: str) -> dict[str, float]:
        return query_concepts(q)[0][1]

    assert alts("shut down the vm").get("stop") == 0.5
    assert alts("resume the paused job").get(stem("unpause")) == 0.5
    assert alts("roll back to a snapshot").get(stem("restore")) == 0.5
