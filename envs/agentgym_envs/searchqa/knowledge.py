"""The generated default knowledge base: fictional entities, short passages and multi-hop questions.

Contract: `generate(seed)` is a pure function of its seed (one `random.Random`, no clock, no
set iteration), so make_data.py writes the same bytes every run. Every name is invented from
syllables and every word token of a name other than a person's first name is unique, so a
question's answer can only be learnt by searching, and a search for an entity's name finds it.

Entities: countries (capital), cities (country), people (birth city, employer), organisations
(founder, headquarters city) and works (creator). Each passage states one to three facts about
the entity in its title, 20-40 words, the fact-bearing sentence first and in the question's own
words ("born", "city", "founded", ...), so a query made of a 1-hop question's words finds it.
Questions chain 1-3 of these facts; their golden answer is an entity name.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

ONSETS = "b br d dr f g gr h k kh l m n p r s st t th v z".split()
VOWELS = "a e i o u ae ia ou".split()
CODAS = ["", "", "n", "r", "l", "s", "th", "m", "nd", "rk"]
OCCUPATIONS = ["sculptor", "astronomer", "cartographer", "poet", "engineer", "physician"]
OCCUPATIONS += ["merchant", "botanist", "composer", "judge", "architect", "historian"]
FEATURES = ["salt marshes", "terraced vineyards", "stone bridges", "glass markets", "harbours"]
FEATURES += ["copper mines", "night festivals", "river barges", "tea gardens", "old libraries"]
ORG_KINDS = ["Guild", "Company", "Society", "Institute", "Foundry", "Trust", "Collective"]
WORK_FORMS = ["Chronicle", "Ballad", "Atlas", "Sonata", "Codex", "Elegy", "Treatise", "Fresco"]

COUNTRIES, CITIES, PEOPLE, ORGS, WORKS = 40, 480, 1800, 320, 900
QUESTIONS = {1: 1200, 2: 700, 3: 500}
# 1-hop questions added after all of the above, on subjects no 1-hop question of their template
# asked about: training questions only, so that RL on 1-hop questions meets each one about once
# instead of learning the answers of a few hundred by heart.
EXTRA_ONE_HOP = 3000


@dataclass(slots=True)
class Passage:
    title: str
    text: str


@dataclass(slots=True)
class Question:
    question: str
    answer: str
    hops: int
    template: str


@dataclass(slots=True)
class World:
    """Entity names and the relations between them (indices into the name lists)."""

    countries: list[str] = field(default_factory=list)
    capital: list[int] = field(default_factory=list)  # country -> city
    cities: list[str] = field(default_factory=list)
    city_country: list[int] = field(default_factory=list)
    people: list[str] = field(default_factory=list)
    born_in: list[int] = field(default_factory=list)  # person -> city
    works_for: list[int] = field(default_factory=list)  # person -> org
    orgs: list[str] = field(default_factory=list)
    founder: list[int] = field(default_factory=list)  # org -> person
    hq: list[int] = field(default_factory=list)  # org -> city
    works: list[str] = field(default_factory=list)
    creator: list[int] = field(default_factory=list)  # work -> person
    born_year: list[int] = field(default_factory=list)  # person -> year (keeps dates coherent)


class _Names:
    """Unique invented words: no word is handed out twice."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.used: set[str] = set()

    def word(self, syllables: tuple[int, int] = (2, 3)) -> str:
        while True:
            n = self.rng.randint(*syllables)
            parts = [self.rng.choice(ONSETS) + self.rng.choice(VOWELS) for _ in range(n)]
            word = ("".join(parts) + self.rng.choice(CODAS)).capitalize()
            if word.lower() not in self.used and len(word) >= 4:
                self.used.add(word.lower())
                return word


def build_world(rng: random.Random) -> World:
    names = _Names(rng)
    w = World()
    w.countries = [names.word() for _ in range(COUNTRIES)]
    w.cities = [names.word() for _ in range(CITIES)]
    # Every country gets at least one city (its capital is its first).
    w.city_country = [i % COUNTRIES for i in range(COUNTRIES)]
    w.city_country += [rng.randrange(COUNTRIES) for _ in range(CITIES - COUNTRIES)]
    w.capital = list(range(COUNTRIES))
    first_names = [names.word((1, 2)) for _ in range(300)]
    w.people = [f"{rng.choice(first_names)} {names.word()}" for _ in range(PEOPLE)]
    w.born_in = [rng.randrange(CITIES) for _ in range(PEOPLE)]
    w.born_year = [rng.randint(1700, 1950) for _ in range(PEOPLE)]
    w.orgs = [f"{names.word()} {rng.choice(ORG_KINDS)}" for _ in range(ORGS)]
    w.works_for = [rng.randrange(ORGS) for _ in range(PEOPLE)]
    w.founder = rng.sample(range(PEOPLE), ORGS)  # nobody founds two organisations
    w.hq = [rng.randrange(CITIES) for _ in range(ORGS)]
    w.works = [f"{rng.choice(WORK_FORMS)} of {names.word()}" for _ in range(WORKS)]
    w.creator = [rng.randrange(PEOPLE) for _ in range(WORKS)]
    return w


def passages(w: World, rng: random.Random) -> list[Passage]:
    out: list[Passage] = []
    for i, name in enumerate(w.countries):
        a, b = rng.sample(FEATURES, 2)
        cap = w.cities[w.capital[i]]
        out.append(
            Passage(
                name,
                f"The capital of {name} is the city of {cap}. {name} is a country known for "
                f"its {a} and its {b}, and travellers often describe it as quiet and green.",
            )
        )
    for i, name in enumerate(w.cities):
        country = w.countries[w.city_country[i]]
        out.append(
            Passage(
                name,
                f"{name} is a city in the country of {country}. It is known for its "
                f"{rng.choice(FEATURES)}, and its market square fills with traders each spring.",
            )
        )
    for i, name in enumerate(w.people):
        job, year = rng.choice(OCCUPATIONS), w.born_year[i]
        surname = name.split()[-1]
        city, org = w.cities[w.born_in[i]], w.orgs[w.works_for[i]]
        out.append(
            Passage(
                name,
                f"{name} was born in the city of {city} in {year}. {name} is a {job}, and "
                f"{surname} spent a long and mostly quiet youth there before leaving home.",
            )
        )
        out.append(
            Passage(
                name,
                f"{name} went to work for the organisation {org} in {year + rng.randint(18, 30)}"
                f". {surname} stayed there for {rng.randint(3, 30)} years and was known for "
                "patient, careful work.",
            )
        )
    for i, name in enumerate(w.orgs):
        person, city = w.people[w.founder[i]], w.cities[w.hq[i]]
        year = w.born_year[w.founder[i]] + rng.randint(25, 50)
        out.append(
            Passage(
                name,
                f"{name} was founded by {person} in {year}. {name} is "
                f"headquartered in the city of {city} and employs about "
                f"{rng.randint(2, 90) * 10} people.",
            )
        )
    for i, name in enumerate(w.works):
        person = w.people[w.creator[i]]
        form = name.split()[0].lower()
        year = w.born_year[w.creator[i]] + rng.randint(20, 60)
        a = "an" if form[0] in "aeiou" else "a"
        out.append(
            Passage(
                name,
                f"{name} is {a} {form} created by {person} in {year}. Critics "
                f"praised the {form} for its clear structure and unusual calm.",
            )
        )
    return out


# (hops, template, subject kind, question text, relations followed from the subject)
TEMPLATES: list[tuple[int, str, str, str, tuple[str, ...]]] = [
    (1, "person-city", "person", "In which city was {} born?", ("born",)),
    (1, "person-org", "person", "For which organisation did {} go to work?", ("employer",)),
    (1, "city-country", "city", "In which country is the city of {}?", ("country",)),
    (1, "country-capital", "country", "What is the capital of {}?", ("capital",)),
    (1, "org-hq", "org", "In which city is {} headquartered?", ("hq",)),
    (1, "org-founder", "org", "Who founded {}?", ("founder",)),
    (1, "work-creator", "work", "Who created {}?", ("creator",)),
    (2, "person-country", "person", "In which country was {} born?", ("born", "country")),
    (
        2,
        "person-org-hq",
        "person",
        "In which city is the organisation that {} went to work for headquartered?",
        ("employer", "hq"),
    ),
    (
        2,
        "person-org-founder",
        "person",
        "Who founded the organisation that {} went to work for?",
        ("employer", "founder"),
    ),
    (
        2,
        "work-creator-city",
        "work",
        "In which city was the creator of {} born?",
        ("creator", "born"),
    ),
    (
        2,
        "org-founder-city",
        "org",
        "In which city was the founder of {} born?",
        ("founder", "born"),
    ),
    (2, "org-hq-country", "org", "In which country is {} headquartered?", ("hq", "country")),
    (
        3,
        "work-creator-country",
        "work",
        "In which country was the creator of {} born?",
        ("creator", "born", "country"),
    ),
    (
        3,
        "person-org-hq-country",
        "person",
        "In which country is the organisation that {} went to work for headquartered?",
        ("employer", "hq", "country"),
    ),
    (
        3,
        "person-org-founder-city",
        "person",
        "In which city was the founder of the organisation that {} went to work for born?",
        ("employer", "founder", "born"),
    ),
    (
        3,
        "org-founder-country",
        "org",
        "In which country was the founder of {} born?",
        ("founder", "born", "country"),
    ),
]


def _relations(w: World) -> dict[str, tuple[list[int], str]]:
    """relation -> (subject index -> object index, object kind)."""
    return {
        "born": (w.born_in, "city"),
        "employer": (w.works_for, "org"),
        "country": (w.city_country, "country"),
        "capital": (w.capital, "city"),
        "hq": (w.hq, "city"),
        "founder": (w.founder, "person"),
        "creator": (w.creator, "person"),
    }


def questions(w: World, rng: random.Random) -> list[Question]:
    """`QUESTIONS[h]` questions of each hop count, that hop count's templates in turn, a
    template's subjects never repeated; then `EXTRA_ONE_HOP` more 1-hop questions."""
    names = {"person": w.people, "city": w.cities, "country": w.countries, "org": w.orgs}
    names["work"] = w.works
    relations = _relations(w)
    out: list[Question] = []
    subjects: dict[str, list[int]] = {}  # template -> its subjects not asked about yet
    for hops, total in QUESTIONS.items():
        templates = [t for t in TEMPLATES if t[0] == hops]
        for t in templates:
            subjects[t[1]] = rng.sample(range(len(names[t[2]])), len(names[t[2]]))
        out += _ask(templates, subjects, total, names, relations)
    return out + _ask(
        [t for t in TEMPLATES if t[0] == 1], subjects, EXTRA_ONE_HOP, names, relations
    )


def _ask(
    templates: list[tuple[int, str, str, str, tuple[str, ...]]],
    subjects: dict[str, list[int]],
    total: int,
    names: dict[str, list[str]],
    relations: dict[str, tuple[list[int], str]],
) -> list[Question]:
    """Up to `total` questions, the templates in turn, each on a subject popped from its list."""
    out: list[Question] = []
    while len(out) < total and any(subjects[t[1]] for t in templates):
        for hops, name, kind, text, chain in templates:
            if len(out) == total or not subjects[name]:
                continue
            subject = index = subjects[name].pop()
            for rel in chain:
                mapping, kind_after = relations[rel]
                index = mapping[index]
            out.append(
                Question(text.format(names[kind][subject]), names[kind_after][index], hops, name)
            )
    return out


def generate(seed: int) -> tuple[list[Passage], list[Question]]:
    """The whole knowledge base for `seed`: (passages, questions), in a fixed order."""
    rng = random.Random(seed)
    world = build_world(rng)
    return passages(world, rng), questions(world, rng)
