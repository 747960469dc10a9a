"""Search-R1 environment: action parsing, answer normalisation, episode bookkeeping, BM25 retrieval."""

from collapsewatch.env import (
    INVALID_ACTION_MESSAGE,
    Action,
    EnvConfig,
    KBConfig,
    SearchEnv,
    build_kb,
    exact_match,
    gold_trace,
    make_env_factory,
    normalize_answer,
    parse_action,
)
from collapsewatch.env.retriever import BM25Retriever

SMALL = KBConfig(seed=3, n_people=30, n_cities=8, n_countries=3, n_companies=5)


def test_parse_well_formed_actions():
    assert parse_action("<search> Lamzor Brosdom</search>") == Action("search", "Lamzor Brosdom")
    assert parse_action("<answer>Drirford</answer>") == Action("answer", "Drirford")
    # a <think> block and text around the tag are allowed; the first complete tag wins (Search-R1)
    assert parse_action("<think>hm</think> <answer> a </answer><search>x</search>") == Action("answer", "a")
    assert parse_action("<search>multi\nline</search>") == Action("search", "multi\nline")
    assert parse_action("<answer></answer>") == Action("answer", "")


def test_parse_malformed_actions():
    for text in [
        "",
        "Drirford",
        "<search>no close",
        "<search>x</answer>",
        "<answer>x",
        "</search>x<search>",
        "<search>   </search>",
        "<Search>x</Search>",
    ]:
        assert parse_action(text) == Action("invalid"), text


def test_normalize_answer_squad_rules():
    assert normalize_answer("  The Drirford! ") == "drirford"
    assert normalize_answer("a  New-York,  an  apple") == "newyork apple"  # '-' and ',' are punctuation
    assert normalize_answer("Theory") == "theory"  # 'the' only as a whole word
    assert exact_match("the drirford.", ["Drirford"]) == 1.0
    assert exact_match("Drirfords", ["Drirford"]) == 0.0
    assert exact_match("Sugrad", ["Drirford", "sugrad"]) == 1.0


def test_episode_search_then_answer():
    kb = build_kb(SMALL)
    task = next(t for t in kb.tasks if t.hops == 2)
    env = make_env_factory(kb)(task)
    r1 = env.step(f"<search> {task.gold_queries[0]}</search>")
    assert (r1.done, r1.valid_action, r1.is_search, r1.reward) == (False, True, True, 0.0)
    assert r1.observation.startswith("\n<information>Doc 1: ") and r1.observation.endswith("</information>\n")
    assert kb.passages[task.gold_passage_ids[0]].text in r1.observation
    r2 = env.step("no tag at all")
    assert (r2.observation, r2.done, r2.valid_action, r2.is_search) == (INVALID_ACTION_MESSAGE, False, False, False)
    r3 = env.step(f"<answer> the {task.answers[0].upper()}.</answer>")
    assert (r3.done, r3.valid_action, r3.reward, r3.observation) == (True, True, 1.0, "")
    assert (env.n_turns, env.n_searches, env.n_invalid, env.reward) == (3, 1, 1, 1.0)


def test_wrong_answer_and_max_turns():
    kb = build_kb(SMALL)
    env = SearchEnv(kb.tasks[0], BM25Retriever([p.text for p in kb.passages]), EnvConfig(top_k=2, max_turns=2))
    assert env.step("<answer>Nowhere</answer>").reward == 0.0
    env = SearchEnv(kb.tasks[0], BM25Retriever([p.text for p in kb.passages]), EnvConfig(top_k=2, max_turns=2))
    first = env.step("<search> x y</search>")
    assert first.observation.count("Doc ") <= 2 and not first.done
    last = env.step("<search> again</search>")  # second action = max_turns: ends without reward
    assert (last.done, last.reward, last.observation) == (True, 0.0, "")


def test_bm25_returns_gold_passage_first_for_every_hop():
    kb = build_kb()
    retriever = BM25Retriever([p.text for p in kb.passages])
    for task in kb.tasks:
        for query, pid in zip(task.gold_queries, task.gold_passage_ids, strict=True):
            assert retriever.search_ids(query, 3)[0] == pid, (task, query)
    assert retriever.search("the and of", 3) == []  # only stop words: nothing to match
    assert len(retriever.search(kb.tasks[0].gold_queries[0], 1000)) <= len(kb.passages)


def test_gold_trace_alternates_model_and_observation():
    kb = build_kb(SMALL)
    task = next(t for t in kb.tasks if t.hops == 2)
    segments = gold_trace(task, make_env_factory(kb))
    assert [s.is_model for s in segments] == [True, False, True, False, True]
    assert segments[2].text == f"<search> {task.gold_queries[1]}</search>"
    assert segments[-1].text == f"<answer> {task.answers[0]}</answer>"
