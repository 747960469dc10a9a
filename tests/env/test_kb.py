"""Synthetic knowledge base: determinism from the seed, question/answer consistency, sizes."""

import pytest

from collapsewatch.env import KBConfig, build_kb

SMALL = KBConfig(seed=7, n_people=20, n_cities=6, n_countries=3, n_companies=4)


def test_same_seed_same_world_other_seed_other_world():
    a, b = build_kb(SMALL), build_kb(SMALL)
    assert a.passages == b.passages and a.tasks == b.tasks
    c = build_kb(KBConfig(seed=8, n_people=20, n_cities=6, n_countries=3, n_companies=4))
    assert [p.text for p in c.passages] != [p.text for p in a.passages]


def test_sizes_and_hops():
    kb = build_kb(SMALL)
    # 20 people -> 20 person passages, + 6 cities + 4 companies = 30 passages
    assert len(kb.passages) == 30
    # 4 questions per person (2 one-hop, 2 two-hop) + 1 per city + 1 per company = 80 + 6 + 4 = 90
    assert len(kb.tasks) == 90
    assert sum(t.hops == 2 for t in kb.tasks) == 40
    assert all(len(t.gold_queries) == t.hops == len(t.gold_passage_ids) for t in kb.tasks)
    assert len({p.title for p in kb.passages}) == 30  # entity names are unique


def test_answers_follow_the_facts():
    kb = build_kb(SMALL)
    for t in kb.tasks:
        subject = t.gold_queries[0]
        if t.kind == "born_country":
            city = kb.facts[subject]["born_in"]
            assert t.gold_queries == (subject, city) and t.answers == (kb.facts[city]["in_country"],)
        if t.kind == "born_city":
            assert t.answers == (kb.facts[subject]["born_in"],)
            assert f"born in {t.answers[0]}" in kb.passages[t.gold_passage_ids[0]].text


def test_split_is_disjoint_and_seeded():
    kb = build_kb(SMALL)
    train, held_out = kb.split(0.2)
    assert len(held_out) == 18 and len(train) == 72  # round(90 * 0.2) = 18
    assert not {t.id for t in train} & {t.id for t in held_out}
    assert kb.split(0.2) == (train, held_out)


def test_question_type_filter_and_validation():
    kb = build_kb(
        KBConfig(seed=1, n_people=10, n_cities=3, n_countries=2, n_companies=2, question_types=("born_city",))
    )
    assert len(kb.tasks) == 10 and {t.kind for t in kb.tasks} == {"born_city"}
    with pytest.raises(ValueError, match="unknown"):
        KBConfig(question_types=("nope",))
    with pytest.raises(ValueError, match="n_people"):
        KBConfig(n_people=0)
