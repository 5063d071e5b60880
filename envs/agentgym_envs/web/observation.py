"""The web env's observation: WebArena's accessibility-tree text, with ids that stay stable.

Tree (as WebArena builds it from CDP `Accessibility.getFullAXTree`):
- duplicate AX nodes are dropped; ignored nodes, nodes without a layout box, with a zero-size
  box, or less than 60% inside the viewport are removed and their children move up (the root
  `RootWebArea` is always kept);
- each kept node is a line `[id] role 'name' prop: value ...` (the name as Python's `repr`; the
  properties focusable, editable, readonly, level, settable, multiline, invalid are left out),
  indented by one tab per depth;
- nameless nodes without properties of the roles generic, img, list, strong, paragraph, banner,
  navigation, Section, LabelText, Legend, listitem (and nameless listitems) are hidden, their
  children moved up a level;
- a StaticText line is dropped when it is empty or its text appears in one of the 3 lines kept
  before it.

Ids (unlike WebArena's, which are Chrome's AX node ids and change every step): before each
snapshot every DOM element without a `data-agid` attribute gets the next number of the
episode's counter (`IdBook`); an element keeps its number as long as it lives. Nodes that are
not elements (text, the document) get numbers from the same counter, remembered by their CDP
backend node id. So an element that stays on the page keeps its id across steps.

Observation text (`render`):

    Tab 0 (current): <title> | Tab 1: <title>

    <tree>

    URL: <url>
    OBJECTIVE: <intent>
    PREVIOUS ACTION: <the last command, or None>

optionally preceded by one `NOTE: ...` paragraph (an invalid action, the episode's end). A
tree longer than `max_chars` is cut at a line end with a line saying so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from playwright.sync_api import CDPSession, Page

IGNORED_PROPERTIES = frozenset(
    {"focusable", "editable", "readonly", "level", "settable", "multiline", "invalid"}
)
HIDDEN_WHEN_NAMELESS = frozenset(
    {
        "generic",
        "img",
        "list",
        "strong",
        "paragraph",
        "banner",
        "navigation",
        "Section",
        "LabelText",
        "Legend",
        "listitem",
    }
)
IN_VIEWPORT_RATIO = 0.6
ID_ATTR = "data-agid"
_ASSIGN_IDS = """(n) => {
  for (const el of document.querySelectorAll('*:not([data-agid])')) {
    el.setAttribute('data-agid', String(n++));
  }
  return n;
}"""
_STATIC = re.compile(r"\[\d+\] StaticText (.+)", re.DOTALL)


@dataclass(slots=True)
class IdBook:
    """An episode's id counter and the ids of its non-element nodes."""

    next: int = 1
    by_backend: dict[int, int] = field(default_factory=dict)

    def for_backend(self, backend: int) -> int:
        got = self.by_backend.get(backend)
        if got is None:
            got = self.by_backend[backend] = self.next
            self.next += 1
        return got


@dataclass(frozen=True, slots=True)
class Target:
    """An element an action can address: its id and box (viewport pixels) when observed."""

    id: int
    element: bool  # an element carrying `data-agid` (else a text node: its box is all we have)
    box: tuple[float, float, float, float]

    @property
    def centre(self) -> tuple[float, float]:
        x, y, w, h = self.box
        return x + w / 2, y + h / 2


@dataclass(frozen=True, slots=True)
class Tree:
    text: str
    targets: dict[int, Target]


def snapshot(page: Page, cdp: CDPSession, book: IdBook) -> Tree:
    """The pruned tree of `page`'s viewport (see the module docs)."""
    book.next = int(page.evaluate(_ASSIGN_IDS, book.next))
    dom = cdp.send("DOMSnapshot.captureSnapshot", {"computedStyles": []})
    agids, boxes, known = _dom_facts(dom)
    size = page.viewport_size
    viewport = (size["width"], size["height"]) if size else (1280, 720)
    nodes: list[dict[str, Any]] = []
    seen: set[str] = set()
    for node in cdp.send("Accessibility.getFullAXTree", {})["nodes"]:
        if node["nodeId"] not in seen:
            seen.add(node["nodeId"])
            nodes.append(node)
    if not nodes:
        return Tree("", {})
    by_id = {n["nodeId"]: n for n in nodes}
    used: set[int] = set()
    targets: dict[int, Target] = {}
    root = nodes[0]

    def keep(
        node: dict[str, Any], parent_box: tuple[float, float, float, float] | None
    ) -> tuple[float, float, float, float] | None:
        if node is root:
            return (0.0, 0.0, 10.0, 10.0)
        if node.get("ignored"):
            return None
        backend = node.get("backendDOMNodeId")
        if backend is not None and backend not in known:
            # inside a user-agent shadow tree (a text field's value), which the DOM snapshot
            # leaves out: it lies in its parent's box
            return parent_box
        box = boxes.get(backend) if backend is not None else None
        if box is None or box[2] == 0 or box[3] == 0:
            return None
        return box if _in_view_ratio(box, viewport) >= IN_VIEWPORT_RATIO else None

    def node_id(node: dict[str, Any]) -> tuple[int, bool]:
        backend = int(node.get("backendDOMNodeId", -1))
        agid = agids.get(backend)
        if agid is not None and agid not in used:
            return agid, True
        return book.for_backend(backend), False

    lines: list[str] = []

    def visit(
        node: dict[str, Any], depth: int, parent_box: tuple[float, float, float, float] | None
    ) -> None:
        child_depth = depth
        box = keep(node, parent_box)
        if box is not None:
            line = _line(node, node is root)
            if line is not None:
                ident, element = node_id(node)
                used.add(ident)
                targets[ident] = Target(ident, element, box)
                lines.append("\t" * depth + f"[{ident}] " + line)
                child_depth = depth + 1
        for child in node.get("childIds", []):
            if child in by_id:
                visit(by_id[child], child_depth, box if box is not None else parent_box)

    visit(root, 0, None)
    return Tree(_drop_repeats(lines), targets)


def _line(node: dict[str, Any], root: bool = False) -> str | None:
    """`role 'name' props`, or None for a node WebArena hides (the root's `url` property is
    left out: the URL line says it)."""
    role = node.get("role", {}).get("value")
    name = node.get("name", {}).get("value")
    if not isinstance(role, str) or not isinstance(name, str):
        return None
    props = []
    for prop in node.get("properties", []):
        if prop.get("name") in IGNORED_PROPERTIES or (root and prop.get("name") == "url"):
            continue
        value = prop.get("value", {})
        if "value" in value:
            props.append(f"{prop['name']}: {value['value']}")
    if not name.strip() and (
        (not props and role in HIDDEN_WHEN_NAMELESS) or (props and role == "listitem")
    ):
        return None
    text = f"{role} {name!r}"
    return f"{text} {' '.join(props)}" if props else text


def _drop_repeats(lines: list[str]) -> str:
    out: list[str] = []
    for line in lines:
        if "statictext" in line.lower():
            match = _STATIC.search(line)
            if match:
                text = match.group(1)[1:-1]
                if not text or any(text in prev for prev in out[-3:]):
                    continue
        out.append(line)
    return "\n".join(out)


def _dom_facts(
    dom: dict[str, Any],
) -> tuple[dict[int, int], dict[int, tuple[float, float, float, float]], set[int]]:
    """backend node id -> `data-agid`, -> box in viewport pixels, and the backend ids the
    snapshot knows (main document only)."""
    strings: list[str] = dom["strings"]
    doc = dom["documents"][0]
    nodes = doc["nodes"]
    backends: list[int] = nodes["backendNodeId"]
    agids: dict[int, int] = {}
    for i, attrs in enumerate(nodes.get("attributes", [])):
        for k in range(0, len(attrs) - 1, 2):
            if strings[attrs[k]] == ID_ATTR:
                value = strings[attrs[k + 1]]
                if value.isdigit():
                    agids[backends[i]] = int(value)
                break
    sx, sy = float(doc.get("scrollOffsetX", 0)), float(doc.get("scrollOffsetY", 0))
    boxes: dict[int, tuple[float, float, float, float]] = {}
    layout = doc["layout"]
    for index, bounds in zip(layout["nodeIndex"], layout["bounds"], strict=False):
        backend = backends[index]
        x, y, w, h = (float(v) for v in bounds)
        box = (x - sx, y - sy, w, h)
        old = boxes.get(backend)
        boxes[backend] = box if old is None else _union(old, box)
    return agids, boxes, set(backends)


def _union(
    a: tuple[float, float, float, float], b: tuple[float, float, float, float]
) -> tuple[float, float, float, float]:
    x, y = min(a[0], b[0]), min(a[1], b[1])
    return (x, y, max(a[0] + a[2], b[0] + b[2]) - x, max(a[1] + a[3], b[1] + b[3]) - y)


def _in_view_ratio(box: tuple[float, float, float, float], viewport: tuple[int, int]) -> float:
    x, y, w, h = box
    ix = max(0.0, min(x + w, viewport[0]) - max(x, 0.0))
    iy = max(0.0, min(y + h, viewport[1]) - max(y, 0.0))
    return (ix * iy) / (w * h) if w * h > 0 else 0.0


def tabs_line(pages: list[Page], current: Page) -> str:
    """`Tab 0 (current): title | Tab 1: title`, as WebArena writes it."""
    parts = []
    for i, p in enumerate(pages):
        try:
            title = p.title()
        except Exception:
            title = ""
        parts.append(f"Tab {i} (current): {title}" if p is current else f"Tab {i}: {title}")
    return " | ".join(parts)


def render(
    tabs: str,
    tree: str,
    url: str,
    objective: str,
    previous: str | None,
    max_chars: int,
    note: str | None = None,
) -> str:
    """The observation text (layout in the module docs)."""
    if len(tree) > max_chars:
        cut = tree.rfind("\n", 0, max_chars)
        kept = tree[: cut if cut > 0 else max_chars]
        tree = (
            f"{kept}\n[... accessibility tree cut: showing {len(kept)} of {len(tree)} "
            "characters; scroll or act to see the rest]"
        )
    head = f"NOTE: {note}\n\n" if note else ""
    return (
        f"{head}{tabs}\n\n{tree}\n\nURL: {url}\nOBJECTIVE: {objective}\n"
        f"PREVIOUS ACTION: {previous if previous is not None else 'None'}"
    )
