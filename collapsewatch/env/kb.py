"""Synthetic knowledge base and question set, generated deterministically from a seed.

Entities have invented names (syllable soup), so no pretrained model can answer without searching.
Four kinds of entity, one short passage each:

    person  "Zorvan Keltip was born in Malbrook and works for Quantel."
    city    "Malbrook is a city in Tervania."
    company "Quantel is a company based in Malbrook."
    country (no passage; only ever an answer)

Questions (``Task``) are 1-hop (the answer is in the passage found by searching the entity named in the
question) or 2-hop (the first passage names a bridge entity that must be searched next). Every task carries
its gold search queries, so gold traces for the supervised warm start can be generated from it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

# Syllables chosen to avoid English words and BM25 stop words once glued together.
_ONSETS = ("b", "br", "d", "dr", "f", "g", "k", "kr", "l", "m", "n", "p", "qu", "r", "s", "t", "tr", "v", "z", "th")
_NUCLEI = ("a", "e", "i", "o", "u", "ae", "ou", "y")
_CODAS = ("", "", "n", "r", "l", "s", "th", "x", "m", "k")
_CITY_SUFFIXES = ("ford", "mont", "vale", "holm", "grad", "port")
_COUNTRY_SUFFIXES = ("ia", "land", "stan", "ora")
_COMPANY_SUFFIXES = ("tek", "corp", "ex", "works")

QUESTION_TEMPLATES: dict[str, str] = {
    "born_city": "Where was {subject} born?",
    "employer": "Which company does {subject} work for?",
    "city_country": "Which country is {subject} in?",
    "company_city": "Where is {subject} based?",
    "born_country": "In which country was {subject} born?",
    "employer_city": "In which city is the company that {subject} works for?",
}
HOPS: dict[str, int] = {
    "born_city": 1,
    "employer": 1,
    "city_country": 1,
    "company_city": 1,
    "born_country": 2,
    "employer_city": 2,
}


@dataclass(frozen=True)
class KBConfig:
    """Size and seed of a synthetic knowledge base."""

    seed: int = 0
    """Seed of every random choice; the same config always yields the same KB, passages and tasks."""
    n_people: int = 200
    """Person entities; each yields four questions (two 1-hop, two 2-hop)."""
    n_cities: int = 30
    """City entities; each yields one 1-hop question (its country)."""
    n_countries: int = 8
    """Countries; answers only."""
    n_companies: int = 20
    """Company entities; each yields one 1-hop question (its city)."""
    question_types: tuple[str, ...] = tuple(QUESTION_TEMPLATES)
    """Which question templates to generate (keys of ``QUESTION_TEMPLATES``)."""

    def __post_init__(self) -> None:
        for name in ("n_people", "n_cities", "n_countries", "n_companies"):
            if getattr(self, name) < 1:
                raise ValueError(f"KBConfig.{name} must be >= 1, got {getattr(self, name)}")
        unknown = set(self.question_types) - set(QUESTION_TEMPLATES)
        if unknown or not self.question_types:
            raise ValueError(f"KBConfig.question_types: unknown {sorted(unknown)}; known {list(QUESTION_TEMPLATES)}")


@dataclass(frozen=True)
class Passage:
    """One retrievable passage; ``id`` is its index in ``KnowledgeBase.passages``."""

    id: int
    title: str
    text: str


@dataclass(frozen=True)
class Task:
    """One question with its gold answer(s) and the gold search chain that answers it."""

    id: str
    question: str
    answers: tuple[str, ...]
    kind: str
    """Key of ``QUESTION_TEMPLATES``."""
    hops: int
    gold_queries: tuple[str, ...]
    """Search queries (entity names) that a perfect agent issues, in order; len == hops."""
    gold_passage_ids: tuple[int, ...]
    """Passage found by each gold query, aligned with ``gold_queries``."""


@dataclass(frozen=True)
class KnowledgeBase:
    """Passages and tasks of one synthetic world."""

    config: KBConfig
    passages: tuple[Passage, ...]
    tasks: tuple[Task, ...]
    facts: dict[str, dict[str, str]] = field(repr=False, compare=False)
    """entity name -> {relation: value}; relations born_in, works_for, in_country, based_in."""

    def split(self, eval_fraction: float = 0.2) -> tuple[tuple[Task, ...], tuple[Task, ...]]:
        """(train, eval) tasks: a seeded shuffle, the last ``eval_fraction`` held out."""
        if not 0.0 <= eval_fraction < 1.0:
            raise ValueError(f"eval_fraction must be in [0, 1), got {eval_fraction}")
        order = list(self.tasks)
        random.Random(self.config.seed + 1).shuffle(order)
        n_eval = int(round(len(order) * eval_fraction))
        return tuple(order[: len(order) - n_eval]), tuple(order[len(order) - n_eval :])


def _word(rng: random.Random, n_syllables: int) -> str:
    parts = [rng.choice(_ONSETS) + rng.choice(_NUCLEI) + rng.choice(_CODAS) for _ in range(n_syllables)]
    return "".join(parts)


def _unique_names(rng: random.Random, n: int, make, taken: set[str]) -> list[str]:
    names: list[str] = []
    for _ in range(1000 * n):
        if len(names) == n:
            break
        name = make()
        if name.lower() not in taken:
            taken.add(name.lower())
            names.append(name)
    if len(names) < n:
        raise ValueError(f"could not invent {n} distinct names; use a smaller KBConfig")
    return names


def _make_names(config: KBConfig, rng: random.Random) -> dict[str, list[str]]:
    taken: set[str] = set()
    countries = _unique_names(
        rng, config.n_countries, lambda: (_word(rng, 1) + rng.choice(_COUNTRY_SUFFIXES)).capitalize(), taken
    )
    cities = _unique_names(
        rng, config.n_cities, lambda: (_word(rng, 1) + rng.choice(_CITY_SUFFIXES)).capitalize(), taken
    )
    companies = _unique_names(
        rng, config.n_companies, lambda: (_word(rng, 1) + rng.choice(_COMPANY_SUFFIXES)).capitalize(), taken
    )
    # First and last names come from small pools so that people share names: BM25 then returns
    # realistic distractors (same first name) beside the gold passage.
    first_pool = [_word(rng, 2).capitalize() for _ in range(max(4, config.n_people // 4))]
    last_pool = [_word(rng, 2).capitalize() for _ in range(max(4, config.n_people // 3))]
    people = _unique_names(rng, config.n_people, lambda: f"{rng.choice(first_pool)} {rng.choice(last_pool)}", taken)
    return {"country": countries, "city": cities, "company": companies, "person": people}


def _make_facts(names: dict[str, list[str]], rng: random.Random) -> dict[str, dict[str, str]]:
    facts: dict[str, dict[str, str]] = {}
    for city in names["city"]:
        facts[city] = {"in_country": rng.choice(names["country"])}
    for company in names["company"]:
        facts[company] = {"based_in": rng.choice(names["city"])}
    for person in names["person"]:
        facts[person] = {"born_in": rng.choice(names["city"]), "works_for": rng.choice(names["company"])}
    return facts


def _make_passages(names: dict[str, list[str]], facts: dict[str, dict[str, str]]) -> list[Passage]:
    texts: list[tuple[str, str]] = []
    for person in names["person"]:
        f = facts[person]
        texts.append((person, f"{person} was born in {f['born_in']} and works for {f['works_for']}."))
    for city in names["city"]:
        texts.append((city, f"{city} is a city in {facts[city]['in_country']}."))
    for company in names["company"]:
        texts.append((company, f"{company} is a company based in {facts[company]['based_in']}."))
    return [Passage(id=i, title=title, text=text) for i, (title, text) in enumerate(texts)]


def _chains(names: dict[str, list[str]], facts: dict[str, dict[str, str]]):
    """Yield (kind, subject, answer, gold query chain) for every question the KB supports."""
    for person in names["person"]:
        city, company = facts[person]["born_in"], facts[person]["works_for"]
        yield "born_city", person, city, (person,)
        yield "employer", person, company, (person,)
        yield "born_country", person, facts[city]["in_country"], (person, city)
        yield "employer_city", person, facts[company]["based_in"], (person, company)
    for city in names["city"]:
        yield "city_country", city, facts[city]["in_country"], (city,)
    for company in names["company"]:
        yield "company_city", company, facts[company]["based_in"], (company,)


def build_kb(config: KBConfig | None = None) -> KnowledgeBase:
    """Generate the knowledge base of ``config`` (default ``KBConfig()``); pure function of the config."""
    config = config or KBConfig()
    rng = random.Random(config.seed)
    names = _make_names(config, rng)
    facts = _make_facts(names, rng)
    passages = _make_passages(names, facts)
    by_title = {p.title: p.id for p in passages}
    tasks = []
    for kind, subject, answer, queries in _chains(names, facts):
        if kind not in config.question_types:
            continue
        tasks.append(
            Task(
                id=f"q{len(tasks)}",
                question=QUESTION_TEMPLATES[kind].format(subject=subject),
                answers=(answer,),
                kind=kind,
                hops=HOPS[kind],
                gold_queries=queries,
                gold_passage_ids=tuple(by_title[q] for q in queries),
            )
        )
    return KnowledgeBase(config=config, passages=tuple(passages), tasks=tuple(tasks), facts=facts)
