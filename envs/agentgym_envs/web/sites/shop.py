"""The shop (`__SHOPPING__`): catalogue by category, search, product pages with reviews, a
cart, checkout and the demo customer's account with order history.

Contract (routes; every page is server-rendered HTML, forms are GET/POST without scripts):
`/` categories and search; `/category/<slug>?sort=price|rating|name`; `/search?q=`;
`/product/<slug>` details, reviews and an add-to-cart form (POST `/cart/add`: `product`,
`qty`); `/cart` lines (`tr#cart-<SKU>` with a `qty` input; POST `/cart/update`,
`/cart/remove`); `/checkout` (POST places the order); every POST redirects (303) to a page;
`/account/login` (POST `email`, `password`), `/account/logout` (POST), `/account/orders` and
`/order/<n>` (signed in only), `/order/latest` (the newest order). State changes (cart, login,
orders placed) are the session's own (`state.py`); the catalogue is the generated base.
"""

from __future__ import annotations

from collections.abc import Callable

from agentgym_envs.server.asgi import Receive, Scope, Send
from agentgym_envs.web.sites.data import Order, OrderLine, Product, ShopData, money, slugify
from agentgym_envs.web.sites.http import (
    ANY,
    POST,
    Response,
    Visit,
    esc,
    html_page,
    not_found,
    page,
    redirect,
    search_form,
    site_app,
)
from agentgym_envs.web.sites.state import SessionStore, ShopState

SITE = "One Stop Shop"


class ShopApp:
    """ASGI app of the shop over `data`, with per-session state in `store`."""

    def __init__(self, data: ShopData, max_sessions: int = 2048, idle_s: float = 1800.0) -> None:
        self.data = data
        self.products = {p.id: p for p in data.products}
        self.by_slug = {p.slug: p for p in data.products}
        self.store: SessionStore[ShopState] = SessionStore(
            lambda: ShopState(cart=dict(data.cart)), max_sessions, idle_s
        )
        self.app = site_app(self._routes())

    def login(self, session: str) -> None:
        """Sign the session in as the demo customer (a task with `require_login`)."""
        self.store.get(session).logged_in = True

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)

    # -- routes -----------------------------------------------------------------------------

    def _routes(self) -> list[tuple[str, Callable[[Visit], Response], tuple[str, ...]]]:
        state = self._state
        return [
            ("/", lambda v: self.home(state(v)), ANY),
            ("/category/{slug}", self._category, ANY),
            ("/search", lambda v: self.search(state(v), v.query.get("q", "")), ANY),
            ("/product/{slug}", self._product, ANY),
            ("/cart", lambda v: self.cart(state(v)), ANY),
            ("/cart/{op}", lambda v: self.cart_op(state(v), v.params["op"], v.form), POST),
            ("/checkout", lambda v: self.checkout(state(v), v.method == "POST", v.form), ANY),
            (
                "/account/login",
                lambda v: self.login_page(state(v), v.method == "POST", v.form),
                ANY,
            ),
            ("/account/logout", self._logout, POST),
            ("/account/orders", lambda v: self.orders(state(v)), ANY),
            ("/order/{number}", self._order, ANY),
        ]

    def _state(self, v: Visit) -> ShopState:
        return self.store.get(v.session)

    def _category(self, v: Visit) -> Response:
        return self.category(self._state(v), v.params["slug"], v.query.get("sort", "name"))

    def _product(self, v: Visit) -> Response:
        added = v.query.get("added", "")
        notice = f"Added {added} to your cart." if added else ""
        return self.product(self._state(v), v.params["slug"], notice)

    def _logout(self, v: Visit) -> Response:
        self._state(v).logged_in = False
        return redirect("/")

    def _order(self, v: Visit) -> Response:
        placed = "Thank you! Your order has been placed." if "placed" in v.query else ""
        return self.order(self._state(v), v.params["number"], placed)

    # -- layout -----------------------------------------------------------------------------

    def _page(self, state: ShopState, title: str, main: str, notice: str = "") -> Response:
        count = sum(state.cart.values())
        account = (
            "<a href='/account/orders'>My Orders</a>"
            "<form method='post' action='/account/logout' style='display:inline'>"
            "<button type='submit'>Sign Out</button></form>"
            if state.logged_in
            else "<a href='/account/login'>Sign In</a>"
        )
        nav = (
            "".join(f"<a href='/category/{slugify(c)}'>{esc(c)}</a>" for c in self.data.categories)
            + f"<a href='/cart'>My Cart ({count})</a>{account}"
        )
        return html_page(page(title, main, SITE, nav, notice))

    def _all_orders(self, state: ShopState) -> list[Order]:
        return [*self.data.orders, *state.orders]

    @staticmethod
    def _rating(p: Product) -> str:
        return f"{p.rating:.1f} out of 5" if p.rating is not None else "No ratings yet"

    def _product_table(self, products: list[Product]) -> str:
        if not products:
            return "<p>No products found.</p>"
        rows = "".join(
            f"<tr><td><a href='/product/{p.slug}'>{esc(p.name)}</a></td>"
            f"<td>{money(p.price_cents)}</td><td>{self._rating(p)}</td>"
            f"<td>{len(p.reviews)}</td></tr>"
            for p in products
        )
        return (
            "<table><thead><tr><th>Product</th><th>Price</th><th>Rating</th><th>Reviews</th>"
            f"</tr></thead><tbody>{rows}</tbody></table>"
        )

    # -- pages ------------------------------------------------------------------------------

    def home(self, state: ShopState) -> Response:
        cats = "".join(
            f"<li><a href='/category/{slugify(c)}'>{esc(c)}</a></li>" for c in self.data.categories
        )
        main = (
            f"<h1>Welcome to {SITE}</h1>{search_form(label='Search products')}"
            f"<h2>Categories</h2><ul>{cats}</ul>"
        )
        return self._page(state, "Home", main)

    def category(self, state: ShopState, slug: str, sort: str) -> Response:
        name = next((c for c in self.data.categories if slugify(c) == slug), None)
        if name is None:
            return not_found("No such category")
        products = [p for p in self.data.products if p.category == name]
        if sort == "price":
            products.sort(key=lambda p: p.price_cents)
        elif sort == "rating":
            products.sort(key=lambda p: -(p.rating or 0.0))
        else:
            products.sort(key=lambda p: p.name)
        sorts = " ".join(
            f"<a href='/category/{slug}?sort={k}'>{label}</a>"
            for k, label in (("name", "Name"), ("price", "Price"), ("rating", "Rating"))
        )
        main = (
            f"<h1>{esc(name)}</h1><p>{len(products)} products. Sort by: {sorts}</p>"
            + self._product_table(products)
        )
        return self._page(state, name, main)

    def search(self, state: ShopState, text: str) -> Response:
        words = text.lower().split()
        found = [
            p
            for p in self.data.products
            if words and all(w in f"{p.name} {p.category} {p.sku}".lower() for w in words)
        ]
        main = (
            f"<h1>Search results for '{esc(text)}'</h1>{search_form(text, 'Search products')}"
            f"<p>{len(found)} results</p>{self._product_table(found)}"
        )
        return self._page(state, f"Search: {text}", main)

    def product(self, state: ShopState, slug: str, notice: str = "") -> Response:
        p = self.by_slug.get(slug)
        if p is None:
            return not_found("No such product")
        reviews = "".join(
            f"<article class='review'><h3>{esc(r.title)}</h3>"
            f"<p>Rating: {r.rating} out of 5</p><p>By <span class='reviewer'>{esc(r.author)}"
            f"</span> on {r.date}</p><p>{esc(r.text)}</p></article>"
            for r in p.reviews
        )
        main = (
            f"<h1>{esc(p.name)}</h1><p>Price: <span id='price'>{money(p.price_cents)}</span></p>"
            f"<p>SKU: {p.sku}</p><p>Category: <a href='/category/{slugify(p.category)}'>"
            f"{esc(p.category)}</a></p><p>Average rating: {self._rating(p)}</p>"
            f"<p>{esc(p.description)}</p>"
            "<form method='post' action='/cart/add'>"
            f"<input type='hidden' name='product' value='{p.id}'>"
            "<label for='qty'>Quantity</label> "
            "<input id='qty' name='qty' type='number' min='1' max='99' value='1'> "
            "<button type='submit'>Add to Cart</button></form>"
            f"<h2>Customer Reviews ({len(p.reviews)})</h2>{reviews or '<p>No reviews yet.</p>'}"
        )
        return self._page(state, p.name, main, notice)

    def cart(self, state: ShopState, notice: str = "") -> Response:
        rows = ""
        total = 0
        for pid, qty in state.cart.items():
            p = self.products[pid]
            total += qty * p.price_cents
            rows += (
                f"<tr id='cart-{p.sku}'><td><a href='/product/{p.slug}'>{esc(p.name)}</a></td>"
                f"<td>{money(p.price_cents)}</td><td><form method='post' action='/cart/update'>"
                f"<input type='hidden' name='product' value='{pid}'>"
                f"<label for='qty-{pid}'>Quantity of {esc(p.name)}</label> "
                f"<input id='qty-{pid}' name='qty' type='number' min='0' value='{qty}'> "
                "<button type='submit'>Update</button></form></td>"
                f"<td>{money(qty * p.price_cents)}</td><td><form method='post' "
                f"action='/cart/remove'><input type='hidden' name='product' value='{pid}'>"
                f"<button type='submit' aria-label='Remove {esc(p.name)}'>Remove</button>"
                "</form></td></tr>"
            )
        if rows:
            main = (
                "<h1>Shopping Cart</h1><table><thead><tr><th>Product</th><th>Price</th>"
                f"<th>Quantity</th><th>Subtotal</th><th>Action</th></tr></thead><tbody>{rows}"
                f"</tbody></table><p>Order total: <span id='cart-total'>{money(total)}</span></p>"
                "<p><a href='/checkout'>Proceed to Checkout</a></p>"
            )
        else:
            main = "<h1>Shopping Cart</h1><p>Your cart is empty.</p>"
        return self._page(state, "Shopping Cart", main, notice)

    def cart_op(self, state: ShopState, op: str, form: dict[str, str]) -> Response:
        try:
            pid = int(form.get("product", ""))
            qty = int(form.get("qty", "1") or "0")
        except ValueError:
            return self.cart(state, "Invalid product or quantity.")
        product = self.products.get(pid)
        if product is None or not 0 <= qty <= 99:
            return self.cart(state, "Invalid product or quantity.")
        if op == "add" and qty > 0:
            state.cart[pid] = min(99, state.cart.get(pid, 0) + qty)
            return redirect(f"/product/{product.slug}?added={qty}")
        if op == "update" and qty > 0:
            state.cart[pid] = qty
            return redirect("/cart")
        if op in ("update", "remove"):
            state.cart.pop(pid, None)
            return redirect("/cart")
        return not_found()

    def checkout(self, state: ShopState, post: bool, form: dict[str, str]) -> Response:
        if not state.logged_in:
            return self.login_page(state, False, {}, "Please sign in to check out.")
        if not state.cart:
            return self.cart(state, "Your cart is empty.")
        c = self.data.customer
        if post:
            number = 1001 + len(self._all_orders(state))
            lines = tuple(
                OrderLine(pid, qty, self.products[pid].price_cents)
                for pid, qty in state.cart.items()
            )
            state.orders.append(Order(number, "2025-01-15", "Pending", lines))
            state.cart.clear()
            return redirect(f"/order/{number}?placed=1")
        main = (
            f"<h1>Checkout</h1><p>Ship to: {esc(c.name)}, {esc(c.address)}</p>"
            f"<p>{sum(state.cart.values())} items in your cart.</p>"
            "<form method='post' action='/checkout'><button type='submit'>Place Order</button>"
            "</form>"
        )
        return self._page(state, "Checkout", main)

    def login_page(
        self, state: ShopState, post: bool, form: dict[str, str], notice: str = ""
    ) -> Response:
        c = self.data.customer
        if post:
            if form.get("email", "").strip().lower() == c.email and form.get("password") == (
                c.password
            ):
                state.logged_in = True
                return redirect("/account/orders")
            notice = "The email or password is incorrect."
        main = (
            "<h1>Customer Login</h1><form method='post' action='/account/login'>"
            "<p><label for='email'>Email</label> <input id='email' name='email' type='email'></p>"
            "<p><label for='password'>Password</label> "
            "<input id='password' name='password' type='password'></p>"
            "<button type='submit'>Sign In</button></form>"
        )
        return self._page(state, "Customer Login", main, notice)

    def orders(self, state: ShopState) -> Response:
        if not state.logged_in:
            return self.login_page(state, False, {}, "Please sign in to see your orders.")
        rows = "".join(
            f"<tr><td><a href='/order/{o.number}'>#{o.number}</a></td><td>{o.date}</td>"
            f"<td>{money(o.total_cents)}</td><td>{o.status}</td></tr>"
            for o in reversed(self._all_orders(state))
        )
        main = (
            "<h1>My Orders</h1><table><thead><tr><th>Order</th><th>Date</th><th>Total</th>"
            f"<th>Status</th></tr></thead><tbody>{rows}</tbody></table>"
        )
        return self._page(state, "My Orders", main)

    def order(self, state: ShopState, number: str, notice: str = "") -> Response:
        if not state.logged_in:
            return self.login_page(state, False, {}, "Please sign in to see your orders.")
        orders = self._all_orders(state)
        if number == "latest":
            number = str(orders[-1].number)
        o = next((o for o in orders if str(o.number) == number), None)
        if o is None:
            return not_found("No such order")
        lines = "".join(
            f"<tr class='order-line'><td>{esc(self.products[line.product_id].name)}</td>"
            f"<td>Qty: {line.qty}</td><td>{money(line.price_cents)}</td></tr>"
            for line in o.lines
        )
        main = (
            f"<h1>Order #{o.number}</h1><p>Date: {o.date}</p><p>Status: {o.status}</p>"
            f"<table id='order-items'><thead><tr><th>Product</th><th>Quantity</th><th>Price</th>"
            f"</tr></thead><tbody>{lines}</tbody></table>"
            f"<p>Grand total: <span id='order-total'>{money(o.total_cents)}</span></p>"
        )
        return self._page(state, f"Order #{o.number}", main, notice)
