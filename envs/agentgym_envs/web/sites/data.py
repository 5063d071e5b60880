"""The generated base data of the two sites served here: a shop and a forum.

Contract: `generate(seed)` is a pure function of its seed (one `random.Random` per site, no
clock, no set iteration), so the sites and `make_tasks.py` (which reads the same data to write
the task configs) always agree, and the same seed gives the same bytes. Every name a task
refers to (product, review title, thread title, username) is unique within its site. The data
is the immutable base state; what an episode changes lives in `state.py`, per session.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from functools import lru_cache

SEED = 21

ONSETS = "b br d f g h k l m n p r s st t v z".split()
VOWELS = "a e i o u ai ou".split()
CODAS = ["", "n", "r", "l", "x", "m", "nd"]

SHOP_CATEGORIES: dict[str, list[str]] = {
    "Kitchen": ["Kettle", "Chef Knife", "Cutting Board", "Saucepan", "Teapot", "Whisk"],
    "Garden": ["Trowel", "Watering Can", "Pruning Shears", "Planter", "Hose Reel", "Rake"],
    "Office": ["Desk Lamp", "Notebook", "Stapler", "Pen Set", "Monitor Stand", "Desk Tray"],
    "Outdoor": ["Tent", "Camping Stove", "Sleeping Bag", "Headlamp", "Daypack", "Water Bottle"],
    "Audio": ["Headphones", "Speaker", "Turntable", "Earbuds", "Radio", "Microphone"],
    "Toys": ["Puzzle", "Kite", "Building Set", "Yo-Yo", "Board Game", "Plush Fox"],
    "Bath": ["Towel Set", "Bath Mat", "Soap Dish", "Shower Caddy", "Robe", "Toothbrush Cup"],
    "Pets": ["Dog Bowl", "Cat Tree", "Leash", "Pet Bed", "Chew Toy", "Bird Feeder"],
}
ADJECTIVES = ["Classic", "Compact", "Deluxe", "Everyday", "Nordic", "Pro", "Rustic", "Travel"]
ADJECTIVES += ["Bamboo", "Copper", "Walnut", "Slate", "Linen", "Ceramic", "Steel", "Cedar"]
FIRST = ["Ada", "Bruno", "Carmen", "Dmitri", "Elena", "Farid", "Greta", "Hiro", "Ines", "Jonas"]
FIRST += ["Kalani", "Lena", "Mateo", "Nadia", "Oskar", "Priya", "Quinn", "Rosa", "Sven", "Tariq"]
FIRST += ["Uma", "Viktor", "Wanda", "Ximena", "Yusuf", "Zofia"]
LAST = ["Abbott", "Baptiste", "Castell", "Duarte", "Eklund", "Fontaine", "Galloway", "Haddad"]
LAST += ["Ivanova", "Jensen", "Kowalski", "Lindqvist", "Moreau", "Nakamura", "Okafor", "Petrov"]
LAST += ["Quintero", "Rahman", "Sorensen", "Takahashi", "Umarov", "Valdez", "Whitfield", "Yilmaz"]
REVIEW_TITLES = {
    1: ["Broke in a week", "Not as described", "Very disappointed", "Would not buy again"],
    2: ["Below expectations", "Flimsy build", "Meh at best", "Returned it"],
    3: ["Does the job", "Average quality", "Okay for the price", "Mixed feelings"],
    4: ["Solid purchase", "Pretty good", "Works well", "Happy overall"],
    5: ["Absolutely love it", "Best buy this year", "Five stars", "Exceeded expectations"],
}
REVIEW_TEXTS = {
    1: "It stopped working after a few uses and support never answered.",
    2: "The finish scratches easily and it feels cheaper than the photos.",
    3: "Nothing special, but it does what it says.",
    4: "Good quality and arrived quickly; one small flaw with the packaging.",
    5: "Beautifully made, sturdy and exactly what I wanted.",
}
ORDER_STATUSES = ["Complete", "Complete", "Shipped", "Processing", "Canceled"]

FORUMS: dict[str, str] = {
    "books": "Reading lists, reviews and literary arguments",
    "cooking": "Recipes, techniques and kitchen disasters",
    "cycling": "Bikes, routes and repairs",
    "gardening": "Plants, soil and seasons",
    "photography": "Cameras, light and composition",
    "retrocomputing": "Old machines and the people who keep them running",
    "hiking": "Trails, gear and trip reports",
    "music": "Instruments, records and gigs",
}
TOPICS: dict[str, list[str]] = {
    "books": ["novel", "poetry collection", "audiobook", "library haul", "book club pick"],
    "cooking": ["sourdough starter", "cast iron pan", "curry paste", "dumpling fold", "broth"],
    "cycling": ["gravel bike", "chain wax", "saddle", "climbing route", "commute"],
    "gardening": ["tomato blight", "compost heap", "raised bed", "seed tray", "rose pruning"],
    "photography": ["prime lens", "film stock", "tripod", "night sky shot", "street portrait"],
    "retrocomputing": ["floppy drive", "CRT monitor", "sound card", "BASIC listing", "modem"],
    "hiking": ["ridge walk", "boot blister", "bothy night", "trail map", "rain shell"],
    "music": ["bass amp", "vinyl pressing", "ukulele", "jazz standard", "drum practice"],
}
TITLE_FORMS = ["My first {t}, any advice?", "Is a {t} worth it?", "Show us your {t}"]
TITLE_FORMS += ["The {t} that changed my mind", "Help: {t} gone wrong", "Weekly {t} thread"]
TITLE_FORMS += ["Unpopular opinion about the {t}", "A {t} story from {place}"]
PLACES = ["Lisbon", "Oslo", "Kyoto", "Quito", "Tallinn", "Dakar", "Perth", "Cusco", "Hanoi"]
USER_WORDS = ["quiet", "amber", "rusty", "lunar", "swift", "mossy", "brave", "misty", "polar"]
ANIMALS = ["heron", "otter", "lynx", "badger", "wren", "marten", "ibis", "newt", "stoat", "crane"]
REPLIES = ["Thanks, this helped a lot.", "I had the same problem last spring.", "Strong agree."]
REPLIES += ["Could you post a photo?", "Have you tried asking at a local shop?", "Following."]
REPLIES += ["That is not my experience at all.", "Great write-up!", "Bookmarked for later."]


@dataclass(frozen=True, slots=True)
class Review:
    author: str
    rating: int
    title: str
    text: str
    date: str


@dataclass(frozen=True, slots=True)
class Product:
    id: int
    sku: str
    slug: str
    name: str
    category: str
    price_cents: int
    description: str
    reviews: tuple[Review, ...]

    @property
    def rating(self) -> float | None:
        """Average review rating rounded to one decimal (None without reviews)."""
        if not self.reviews:
            return None
        return round(sum(r.rating for r in self.reviews) / len(self.reviews), 1)


@dataclass(frozen=True, slots=True)
class OrderLine:
    product_id: int
    qty: int
    price_cents: int


@dataclass(frozen=True, slots=True)
class Order:
    number: int
    date: str
    status: str
    lines: tuple[OrderLine, ...]

    @property
    def total_cents(self) -> int:
        return sum(line.qty * line.price_cents for line in self.lines)


@dataclass(frozen=True, slots=True)
class Customer:
    name: str
    email: str
    password: str
    address: str


@dataclass(slots=True)
class ShopData:
    categories: list[str] = field(default_factory=list)
    products: list[Product] = field(default_factory=list)
    customer: Customer = Customer("", "", "", "")
    orders: list[Order] = field(default_factory=list)
    cart: dict[int, int] = field(default_factory=dict)  # product id -> qty: the starting cart

    def by_slug(self, slug: str) -> Product | None:
        return next((p for p in self.products if p.slug == slug), None)


@dataclass(frozen=True, slots=True)
class Post:
    author: str
    body: str
    date: str


@dataclass(frozen=True, slots=True)
class Thread:
    id: int
    forum: str
    title: str
    author: str
    body: str
    date: str
    replies: tuple[Post, ...]


@dataclass(frozen=True, slots=True)
class User:
    name: str
    joined: str
    bio: str


@dataclass(slots=True)
class ForumData:
    forums: dict[str, str] = field(default_factory=dict)
    users: list[User] = field(default_factory=list)
    threads: list[Thread] = field(default_factory=list)
    me: str = ""  # the signed-in demo user


def slugify(text: str) -> str:
    out = "".join(c.lower() if c.isalnum() else "-" for c in text)
    return "-".join(part for part in out.split("-") if part)


def _date(rng: random.Random, year: int) -> str:
    return f"{year}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"


def _brand(rng: random.Random, used: set[str]) -> str:
    while True:
        word = "".join(rng.choice(ONSETS) + rng.choice(VOWELS) for _ in range(2))
        word = (word + rng.choice(CODAS)).capitalize()
        if word not in used and len(word) >= 4:
            used.add(word)
            return word


def generate_shop(seed: int) -> ShopData:
    rng = random.Random(f"shop-{seed}")
    shop = ShopData(categories=list(SHOP_CATEGORIES))
    brands: set[str] = set()
    people = [f"{f} {s}" for f in FIRST for s in LAST]
    for category, nouns in SHOP_CATEGORIES.items():
        for noun in nouns:
            for adjective in rng.sample(ADJECTIVES, 2):
                pid = len(shop.products)
                name = f"{_brand(rng, brands)} {adjective} {noun}"
                n_reviews = rng.choice([0, 1, 2, 3, 3, 4, 5, 6])
                reviews = []
                for author in rng.sample(people, n_reviews):
                    rating = rng.choice([1, 2, 3, 3, 4, 4, 4, 5, 5, 5])
                    title = rng.choice(REVIEW_TITLES[rating])
                    reviews.append(
                        Review(author, rating, title, REVIEW_TEXTS[rating], _date(rng, 2023))
                    )
                shop.products.append(
                    Product(
                        id=pid,
                        sku=f"SKU-{4100 + pid}",
                        slug=slugify(name),
                        name=name,
                        category=category,
                        price_cents=rng.randint(3, 240) * 100 + rng.choice([0, 49, 95, 99]),
                        description=f"A {adjective.lower()} {noun.lower()} for everyday use, "
                        f"made by {name.split()[0]}.",
                        reviews=tuple(reviews),
                    )
                )
    shop.customer = Customer(
        "Robin Hale", "robin.hale@example.com", "shop1234", "12 Orchard Lane, Millbrook"
    )
    for number in range(1, 11):
        lines = []
        for product in rng.sample(shop.products, rng.randint(1, 3)):
            lines.append(OrderLine(product.id, rng.randint(1, 3), product.price_cents))
        date = f"2024-{number:02d}-{rng.randint(1, 28):02d}"
        shop.orders.append(Order(1000 + number, date, rng.choice(ORDER_STATUSES), tuple(lines)))
    for product in rng.sample(shop.products, 2):
        shop.cart[product.id] = rng.randint(1, 2)
    return shop


def generate_forum(seed: int) -> ForumData:
    rng = random.Random(f"forum-{seed}")
    forum = ForumData(forums=dict(FORUMS))
    names = [f"{w}_{a}" for w in USER_WORDS for a in ANIMALS]
    chosen = rng.sample(names, 40)
    for name in chosen:
        topic = rng.choice(list(FORUMS))
        forum.users.append(User(name, _date(rng, rng.randint(2015, 2022)), f"Mostly in f/{topic}."))
    forum.me = chosen[0]
    titles: set[str] = set()
    posters = chosen[1:]
    for name in FORUMS:
        for _ in range(14):
            while True:
                form = rng.choice(TITLE_FORMS)
                title = form.format(t=rng.choice(TOPICS[name]), place=rng.choice(PLACES))
                if title not in titles:
                    titles.add(title)
                    break
            replies = tuple(
                Post(rng.choice(posters), rng.choice(REPLIES), _date(rng, 2024))
                for _ in range(rng.choice([0, 1, 2, 3, 4, 5, 7]))
            )
            body = f"Posting about a {rng.choice(TOPICS[name])}. What do you all think?"
            forum.threads.append(
                Thread(
                    id=len(forum.threads) + 1,
                    forum=name,
                    title=title,
                    author=rng.choice(posters),
                    body=body,
                    date=_date(rng, 2023),
                    replies=replies,
                )
            )
    return forum


@lru_cache(maxsize=4)
def generate(seed: int = SEED) -> tuple[ShopData, ForumData]:
    """Both sites' base data (cached: callers must not mutate it)."""
    return generate_shop(seed), generate_forum(seed)


def money(cents: int) -> str:
    return f"${cents // 100:,}.{cents % 100:02d}"
