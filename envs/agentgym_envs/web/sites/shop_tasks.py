"""The shop's tasks, read off its generated data: `info` (string_match on the stop answer),
`nav` (url_match), `action` (program_html on the cart or the newest order), and a few
`fuzzy_match` review summaries that need a judge.

Contract: `shop_tasks(shop, rng)` is pure given the rng's state; answers are what the shop's
pages show (prices without the currency sign, ratings with one decimal).
"""

from __future__ import annotations

import random
from typing import Any

from agentgym_envs.web.sites.data import ShopData, money, slugify
from agentgym_envs.web.sites.task_config import LOGIN, SHOP, Task, answer, html, task, url


def shop_tasks(shop: ShopData, rng: random.Random) -> list[Task]:
    out: list[Task] = []
    products = shop.products
    rated = [p for p in products if p.reviews]
    for p in rng.sample(products, 12):
        out.append(
            task(
                "shop/info",
                "What is the price of the {product}?",
                {"product": p.name},
                answer(money(p.price_cents)[1:]),
                SHOP,
            )
        )
    for p in rng.sample(rated, 10):
        out.append(
            task(
                "shop/info",
                "What is the average customer rating of the {product}? Answer with one decimal.",
                {"product": p.name},
                answer(f"{p.rating:.1f}"),
                SHOP,
            )
        )
    for p in rng.sample(products, 8):
        out.append(
            task(
                "shop/info",
                "How many customer reviews does the {product} have?",
                {"product": p.name},
                answer(str(len(p.reviews))),
                SHOP,
            )
        )
    for p in rng.sample(products, 6):
        out.append(
            task(
                "shop/info",
                "What is the SKU of the {product}?",
                {"product": p.name},
                answer(p.sku),
                SHOP,
            )
        )
    for category in shop.categories:
        inside = [p for p in products if p.category == category]
        best = sorted((p for p in inside if p.reviews), key=lambda p: -(p.rating or 0))
        if len(best) > 1 and best[0].rating != best[1].rating:
            out.append(
                task(
                    "shop/info",
                    "Which product in the {category} category has the highest average rating?",
                    {"category": category},
                    answer(best[0].name),
                    SHOP,
                )
            )
        cheap = sorted(inside, key=lambda p: p.price_cents)
        if cheap[0].price_cents != cheap[1].price_cents:
            out.append(
                task(
                    "shop/info",
                    "What is the cheapest product in the {category} category?",
                    {"category": category},
                    answer(cheap[0].name),
                    SHOP,
                )
            )
    for p in rng.sample(
        [p for p in rated if len({r.title for r in p.reviews}) == len(p.reviews)], 8
    ):
        r = rng.choice(p.reviews)
        out.append(
            task(
                "shop/info",
                "Who wrote the review titled '{title}' of the {product}?",
                {"title": r.title, "product": p.name},
                answer(r.author),
                SHOP,
            )
        )
    out.append(
        task(
            "shop/info",
            "How many orders have I placed in total?" + LOGIN,
            {},
            answer(str(len(shop.orders))),
            SHOP,
            login=True,
        )
    )
    by_id = {p.id: p for p in products}
    for o in rng.sample(shop.orders, 4):
        values = {"number": o.number}
        out.append(
            task(
                "shop/info",
                "What was the grand total of my order #{number}?" + LOGIN,
                values,
                answer(money(o.total_cents)[1:]),
                SHOP,
                login=True,
            )
        )
        out.append(
            task(
                "shop/info",
                "On which date (YYYY-MM-DD) did I place order #{number}?" + LOGIN,
                values,
                answer(o.date),
                SHOP,
                login=True,
            )
        )
        out.append(
            task(
                "shop/info",
                "Which products did I buy in order #{number}?" + LOGIN,
                values,
                answer(*(by_id[line.product_id].name for line in o.lines)),
                SHOP,
                login=True,
            )
        )
    # navigation
    for p in rng.sample(products, 12):
        out.append(
            task(
                "shop/nav",
                "Open the product page of the {product}.",
                {"product": p.name},
                url(f"{SHOP}/product/{p.slug}"),
                SHOP,
            )
        )
    for category in shop.categories:
        out.append(
            task(
                "shop/nav",
                "Show the {category} category sorted by price.",
                {"category": category},
                url(f"{SHOP}/category/{slugify(category)}?sort=price"),
                SHOP,
            )
        )
    for term in rng.sample(sorted({p.name.split()[-1].lower() for p in products}), 5):
        out.append(
            task(
                "shop/nav",
                "Search the shop for '{term}'.",
                {"term": term},
                url(f"{SHOP}/search?q={term}"),
                SHOP,
            )
        )
    for o in rng.sample(shop.orders, 5):
        out.append(
            task(
                "shop/nav",
                "Open the details page of my order #{number}." + LOGIN,
                {"number": o.number},
                url(f"{SHOP}/order/{o.number}"),
                SHOP,
                True,
            )
        )
    out += shop_actions(shop, rng)
    return out


def shop_actions(shop: ShopData, rng: random.Random) -> list[Task]:
    out: list[Task] = []
    by_id = {p.id: p for p in shop.products}
    latest = {line.product_id for line in shop.orders[-1].lines}
    free = [p for p in shop.products if p.id not in shop.cart and p.id not in latest]
    qty_of = "document.querySelector('#cart-{sku} input[name=qty]').value"
    for p in rng.sample(free, 16):
        n = rng.randint(1, 4)
        target = (f"{SHOP}/cart", qty_of.format(sku=p.sku), {"exact_match": str(n)})
        out.append(
            task(
                "shop/action",
                "Add {n} of the {product} to my cart.",
                {"n": n, "product": p.name},
                html(target),
                SHOP,
            )
        )
    for pid, qty in shop.cart.items():
        p = by_id[pid]
        gone = (
            f"{SHOP}/cart",
            f"String(document.querySelector('#cart-{p.sku}') === null)",
            {"exact_match": "true"},
        )
        out.append(
            task(
                "shop/action",
                "Remove the {product} from my cart.",
                {"product": p.name},
                html(gone),
                SHOP,
            )
        )
        for n in rng.sample([k for k in range(2, 7) if k != qty], 2):
            target = (f"{SHOP}/cart", qty_of.format(sku=p.sku), {"exact_match": str(n)})
            out.append(
                task(
                    "shop/action",
                    "Change the quantity of the {product} in my cart to {n}.",
                    {"product": p.name, "n": n},
                    html(target),
                    SHOP,
                )
            )
    items = "document.querySelector('#order-items').outerText"
    for p in rng.sample(free, 8):
        n = rng.randint(1, 3)
        bought: dict[str, Any] = {"must_include": [p.name, f"Qty: {n}"]}
        target = (f"{SHOP}/order/latest", items, bought)
        out.append(
            task(
                "shop/action",
                "Buy {n} of the {product}: add them to my cart and place the order." + LOGIN,
                {"n": n, "product": p.name},
                html(target),
                SHOP,
                login=True,
            )
        )
    c = shop.customer
    for start in (f"{SHOP}", f"{SHOP}/account/login"):
        config = task(
            "shop/action",
            "Sign in with the email {email} and the password {password},"
            " then open my order history.",
            {"email": c.email, "password": c.password},
            url(f"{SHOP}/account/orders"),
            start,
        )
        heading = ("last", "document.querySelector('h1').outerText", {"exact_match": "My Orders"})
        config["eval"]["eval_types"].append("program_html")
        config["eval"]["program_html"] = html(heading)["program_html"]
        out.append(config)
    for p in rng.sample([p for p in shop.products if len(p.reviews) >= 2], 6):
        r = p.reviews[0]
        config = task(
            "shop/info",
            "What did {author} think of the {product}? Summarise their review.",
            {"author": r.author, "product": p.name},
            {},
            SHOP,
        )
        config["eval"] |= {
            "eval_types": ["string_match"],
            "reference_answers": {"fuzzy_match": [r.text]},
        }
        out.append(config)
    return out
