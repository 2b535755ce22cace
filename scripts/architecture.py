#!/usr/bin/env python3
"""Draws docs/architecture.svg from the workspace as it is.

    python3 scripts/architecture.py           # (re)write docs/architecture.svg
    python3 scripts/architecture.py --check   # exit 1 if the committed drawing is stale

What it reads (from the repository root, standard library only):

* `cargo metadata --no-deps --format-version 1 --offline`: the workspace's crates, their
  paths and their path dependencies on each other (normal and build ones are drawn,
  dev-dependencies are listed under the legend);
* PARTS below, the parts Cargo does not know (the Go and Python bindings, the npm package,
  the web demo's page): their names come from their own manifests (go.mod, pyproject.toml,
  package.json), the Python wheel's crate from its `tool.maturin.manifest-path`;
* every crate's `.rs` files outside tests/examples/benches: a crate that names
  `session::Session` gets the mark S (it runs a Session);
* src/lib.rs: the core's modules; src/session/contract.rs: the variants of `Event` and
  `Action`; src/session/mod.rs: the `Session` methods the data flow names.

The output depends only on those inputs: the same tree gives the same bytes. `--check` also
fails when the text drawing in docs/architecture.md does not name every workspace crate.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SVG_PATH = os.path.join("docs", "architecture.svg")
DOC_PATH = os.path.join("docs", "architecture.md")

# ---------------------------------------------------------------------------------------
# The hand-kept part: what Cargo cannot say.
# ---------------------------------------------------------------------------------------

# Colour groups, in legend order: (key, legend label, fill, stroke).
GROUPS = [
    ("core", "the core", "#e8f0fe", "#1f5fbf"),
    ("adapters", "adapters: hosts over real I/O", "#fff4e5", "#c77700"),
    ("abi", "the C ABI and its bindings", "#f3e8fd", "#7b3fb5"),
    ("sim", "simulator and demo", "#eaf7ea", "#2e7d32"),
    ("tools", "tools: CLI, bridge, lab", "#e9eef2", "#546e7a"),
    ("testing", "test fixtures", "#f4f4f4", "#8a8a8a"),
]

# A part's group by the first matching path prefix (the core is the root package).
GROUP_BY_PATH = [
    ("adapters/cli", "tools"),
    ("adapters/bridge", "tools"),
    ("lab", "tools"),
    ("adapters/", "adapters"),
    ("abi", "abi"),
    ("bindings/", "abi"),
    ("sim", "sim"),
    ("web-demo", "sim"),
    ("testing/", "testing"),
]

# One short line under each box's name; a crate missing here gets none.
CAPTIONS = {
    "stagger-sim": "virtual-time brokers",
    "stagger-tokio": "tokio TCP, TLS",
    "stagger-blocking": "std::net + mio",
    "stagger-web": "wasm, WebSockets",
    "stagger-abi": "native lib + wasm",
    "stagger-bridge": "WebSocket \u2194 TCP",
    "stagger-cli": "the `stagger` binary",
    "stagger-demo": "the visualizer's engine",
    "stagger-test-faults": "fake brokers, faults",
    "stagger-kafka-fixture": "real Kafka clusters",
    "stagger-test-netns": "network namespaces",
    "stagger-chaos": "chaos soak",
    "stagger-lab": "measurements",
}


@dataclass
class Part:
    """A part of the project Cargo does not know."""

    path: str  # its directory
    kind: str  # what it is, shown after the path
    name_from: str  # the file its name comes from (inside path)
    uses: list[str]  # crates it takes a build of (the wheel's also comes from pyproject)
    caption: str
    host: str  # the language that runs a Session through the ABI, if it does


PARTS = [
    Part("bindings/go", "Go module", "go.mod", ["stagger-abi"], "wazero", "Go"),
    Part("bindings/python", "wheel", "pyproject.toml", [], "maturin, cffi", "Python"),
    Part("bindings/java", "Maven project", "pom.xml", ["stagger-abi"], "Chicory", "Java"),
    Part("adapters/browser/npm", "npm", "package.json", ["stagger-web"], "wasm-bindgen", ""),
    Part("web-demo", "page", "index.html", ["stagger-demo", "stagger-web"], "index.html, js/", ""),
]

# Actions the application hears (the rest are the host's work).
APPLICATION_ACTIONS = ["Refreshed", "RefreshFailed", "Rebootstrapped"]
# What the data flow says of each variant; a variant missing here is drawn with its name only.
ACTION_NOTES = {
    "Dial": "open a connection",
    "Send": "write a request frame",
    "Close": "close a connection",
    "Resolve": "look a seed's name up",
    "NeedNonce": "fetch a SCRAM nonce",
    "NeedToken": "fetch an OAUTHBEARER token",
}
EVENT_NOTES = {
    "Connected": "TCP is up",
    "Secured": "TLS handshake done",
    "Received": "bytes read",
    "Closed": "end of stream or reset",
    "IoError": "dial, read, write or TLS failed",
    "Resolved": "addresses, or the failure",
    "Nonce": "the SCRAM nonce",
    "Token": "the OAUTHBEARER token",
}
# The Session methods the data flow names (checked to exist).
SESSION_METHODS = ["request_refresh", "handle_event", "handle_timeout", "poll_action", "poll_timeout", "metadata"]

# ---------------------------------------------------------------------------------------
# Reading the workspace.
# ---------------------------------------------------------------------------------------


class Stale(Exception):
    """The tree no longer matches what this script expects: fix the script."""


@dataclass
class Node:
    id: str
    title: str
    sub: str  # path (and kind) line
    caption: str
    group: str
    cargo: bool
    session: bool = False
    layer: int = 0
    width: float = 0.0
    x: float = 0.0  # centre
    dummy: bool = False
    host: str = ""


@dataclass
class Graph:
    nodes: dict[str, Node] = field(default_factory=dict)
    edges: list[tuple[str, str, str]] = field(default_factory=list)  # (from, to, "dep"|"uses")
    implied: list[tuple[str, str]] = field(default_factory=list)  # not drawn: a path of arrows implies them
    dev: dict[str, list[str]] = field(default_factory=dict)
    core: str = ""
    modules: list[tuple[str, str | None]] = field(default_factory=list)  # (module, feature)
    outside: dict[str, list[str]] = field(default_factory=dict)  # the core's other crates, by feature ("" always)
    events: list[str] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)


def read(rel: str) -> str:
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return f.read()


def cargo_metadata() -> dict:
    cmd = ["cargo", "metadata", "--no-deps", "--format-version", "1", "--offline"]
    try:
        out = subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True).stdout
    except FileNotFoundError:
        sys.exit("architecture.py: cargo not found")
    except subprocess.CalledProcessError as e:
        sys.exit(f"architecture.py: {' '.join(cmd)} failed:\n{e.stderr}")
    return json.loads(out)


def group_of(path: str) -> str:
    for prefix, group in GROUP_BY_PATH:
        if path == prefix.rstrip("/") or path.startswith(prefix):
            return group
    return "tools"


def mentions_session(crate_dir: str, skip: set[str]) -> bool:
    """Whether the crate's own sources (not its tests, examples, benches) name session::Session."""
    pattern = re.compile(r"session::(?:Session\b|\{[^}]*\bSession\b)")
    for here, dirs, files in os.walk(os.path.join(ROOT, crate_dir)):
        dirs[:] = sorted(
            d
            for d in dirs
            if d not in ("tests", "examples", "benches", "target", "node_modules", "pkg", "dist")
            and os.path.relpath(os.path.join(here, d), ROOT) not in skip
        )
        for name in sorted(files):
            if name.endswith(".rs") and pattern.search(read(os.path.relpath(os.path.join(here, name), ROOT))):
                return True
    return False


def enum_variants(source: str, header: str) -> list[str]:
    start = source.find(header)
    if start < 0:
        raise Stale(f"src/session/contract.rs has no `{header}`")
    end = source.find("\n}\n", start)
    body = source[start:end]
    return re.findall(r"^    ([A-Z][A-Za-z0-9]*)\b(?: \{|,|\()", body, re.M)


def load() -> Graph:
    meta = cargo_metadata()
    root = os.path.realpath(meta["workspace_root"])
    members = set(meta["workspace_members"])
    packages = sorted((p for p in meta["packages"] if p["id"] in members), key=lambda p: p["name"])
    g = Graph()
    dirs = {}
    for p in packages:
        path = os.path.relpath(os.path.dirname(os.path.realpath(p["manifest_path"])), root).replace(os.sep, "/")
        dirs[p["name"]] = path
    names = set(dirs)
    core = [n for n, d in dirs.items() if d == "."]
    if len(core) != 1:
        raise Stale("no package at the workspace root (the core)")
    g.core = core[0]
    other_dirs = {d for d in dirs.values() if d != "."}
    for p in packages:
        n, path = p["name"], dirs[p["name"]]
        if n == g.core:
            node = Node(n, n, "src/", "", "core", True)
        else:
            skip = {d for d in other_dirs if d != path and d.startswith(path + "/")}
            node = Node(n, n, path + "/", CAPTIONS.get(n, ""), group_of(path), True, mentions_session(path, skip))
        g.nodes[n] = node
        deps, dev = set(), set()
        for d in p["dependencies"]:
            if d.get("path") is None or d["name"] not in names or d["name"] == n:
                continue
            (dev if d["kind"] == "dev" else deps).add(d["name"])
        g.edges += [(n, d, "dep") for d in sorted(deps)]
        if dev - deps:
            g.dev[n] = sorted(dev - deps)
        if n == g.core:
            for d in p["dependencies"]:
                if d["kind"] == "dev" or d["name"] in names:
                    continue
                feats = [f for f, on in sorted(p["features"].items()) if f"dep:{d['name']}" in on or d["name"] in on]
                key = "" if not d["optional"] else (feats[0] if feats else "?")
                g.outside.setdefault(key, []).append(d["name"])

    for part in PARTS:
        manifest = os.path.join(part.path, part.name_from)
        if not os.path.exists(os.path.join(ROOT, manifest)):
            raise Stale(f"{manifest} is gone: update PARTS in scripts/architecture.py")
        uses = list(part.uses)
        if part.name_from == "go.mod":
            m = re.search(r"^module\s+(\S+)", read(manifest), re.M)
            title = m.group(1) if m else part.path
        elif part.name_from == "pyproject.toml":
            data = tomllib.loads(read(manifest))
            title = data["project"]["name"]
            crate_manifest = data["tool"]["maturin"]["manifest-path"]
            crate_dir = os.path.normpath(os.path.join(part.path, os.path.dirname(crate_manifest))).replace(os.sep, "/")
            uses += [n for n, d in dirs.items() if d == crate_dir]
        elif part.name_from == "pom.xml":
            # The project's own coordinates: the first groupId and artifactId (no parent pom).
            pom = read(manifest)
            group = re.search(r"<groupId>([^<]+)</groupId>", pom)
            artifact = re.search(r"<artifactId>([^<]+)</artifactId>", pom)
            title = f"{group.group(1)}:{artifact.group(1)}" if group and artifact else part.path
        elif part.name_from == "package.json":
            title = json.loads(read(manifest))["name"]
        else:
            title = "web demo"
        pid = f"{part.kind}:{part.path}"
        caption = f"{part.kind} \u00b7 {part.caption}"
        g.nodes[pid] = Node(pid, title, part.path + "/", caption, group_of(part.path), False, bool(part.host))
        g.nodes[pid].host = part.host
        for u in uses:
            if u not in g.nodes:
                raise Stale(f"{part.path} uses crate {u}, which the workspace no longer has")
            g.edges.append((pid, u, "uses"))
    g.edges = sorted(set(g.edges))

    # Modules of the core, and the session's contract.
    lib = read("src/lib.rs")
    for m in re.finditer(r'^(?:#\[cfg\(feature = "(\w+)"\)\]\n)?(?:pub )?mod (\w+);', lib, re.M):
        g.modules.append((m.group(2), m.group(1)))
    contract = read("src/session/contract.rs")
    g.events = enum_variants(contract, "pub enum Event<")
    g.actions = enum_variants(contract, "pub enum Action {")
    for a in APPLICATION_ACTIONS:
        if a not in g.actions:
            raise Stale(f"session::Action has no variant {a}: update APPLICATION_ACTIONS")
    session_mod = read("src/session/mod.rs")
    for method in SESSION_METHODS:
        if not re.search(rf"pub fn {method}\b", session_mod):
            raise Stale(f"session::Session has no method {method}: update SESSION_METHODS")
    g.hosts = [n.id for n in sorted(g.nodes.values(), key=lambda n: (n.cargo is False, n.id)) if n.session]
    return g


# ---------------------------------------------------------------------------------------
# Layout: a layered drawing (longest path to the core, dummies for long edges, barycentre
# ordering, least-squares positions).
# ---------------------------------------------------------------------------------------

SANS = "Helvetica, Arial, 'Liberation Sans', 'DejaVu Sans', sans-serif"
MONO = "ui-monospace, Menlo, Consolas, 'DejaVu Sans Mono', 'Liberation Mono', monospace"

NARROW = set("iljI.,:;'|!()[]{}ft r`")
WIDE = set("mwMW@")


def text_width(s: str, size: float, mono: bool = False, bold: bool = False) -> float:
    """A generous estimate of the rendered width (no font is measured)."""
    if mono:
        return len(s) * 0.6 * size
    w = 0.0
    for c in s:
        if c in NARROW:
            w += 0.32
        elif c in WIDE:
            w += 0.9
        elif c.isupper():
            w += 0.7
        else:
            w += 0.57
    return w * size * (1.12 if bold else 1.06)


TITLE_SIZE, SUB_SIZE, CAPTION_SIZE = 12.0, 10.5, 11.0
BOX_H = 56.0
LAYER_GAP = 64.0
BOX_GAP, DUMMY_W, DUMMY_GAP = 18.0, 10.0, 12.0
MARGIN = 24.0
PULL = 1.0  # how strongly items are drawn to the middle


def box_width(n: Node) -> float:
    w = max(
        text_width(n.title, TITLE_SIZE, mono=True, bold=True),
        text_width(n.sub, SUB_SIZE, mono=True),
        text_width(n.caption, CAPTION_SIZE),
    )
    return max(112.0, round(w + 24.0))


def layer_of(g: Graph) -> None:
    out: dict[str, list[str]] = {n: [] for n in g.nodes}
    for a, b, _ in g.edges:
        out[a].append(b)
    done: dict[str, int] = {}

    def depth(n: str, seen: tuple = ()) -> int:
        if n in seen:
            raise Stale(f"dependency cycle through {n}")
        if n not in done:
            done[n] = 0 if n == g.core else max([1] + [depth(d, seen + (n,)) + 1 for d in out[n]])
        return done[n]

    for n in g.nodes:
        g.nodes[n].layer = depth(n)
    # What nothing depends on (the binary, the bindings, the lab, the page) goes to the top;
    # a test fixture rises to just below the lowest crate that uses it.
    users: dict[str, list[str]] = {n: [] for n in g.nodes}
    for a, b, _ in g.edges:
        users[b].append(a)
    top = max(node.layer for node in g.nodes.values())
    for n, node in g.nodes.items():
        if not users[n] and n != g.core:
            node.layer = top
    for n in sorted(g.nodes, key=lambda n: -g.nodes[n].layer):
        node = g.nodes[n]
        if node.group == "testing" and users[n]:
            node.layer = max(node.layer, min(g.nodes[u].layer for u in users[n]) - 1)


def reduce_edges(g: Graph) -> None:
    """Leaves out an arrow a path of other arrows already implies."""
    out: dict[str, set[str]] = {n: set() for n in g.nodes}
    for a, b, _ in g.edges:
        out[a].add(b)

    def reaches(a: str, b: str, skip: tuple[str, str]) -> bool:
        stack, seen = [a], {a}
        while stack:
            n = stack.pop()
            for d in out[n]:
                if (n, d) == skip or d in seen:
                    continue
                if d == b:
                    return True
                seen.add(d)
                stack.append(d)
        return False

    kept = [(a, b, k) for a, b, k in g.edges if not reaches(a, b, (a, b))]
    g.implied = [(a, b) for a, b, k in g.edges if (a, b, k) not in kept]
    g.edges = kept


def group_rank(n: Node) -> int:
    return [k for k, *_ in GROUPS].index(n.group) if not n.dummy else 0


def crossings(upper: list[str], lower: list[str], links: list[tuple[str, str]]) -> int:
    pu = {n: i for i, n in enumerate(upper)}
    pl = {n: i for i, n in enumerate(lower)}
    segs = sorted((pu[a], pl[b]) for a, b in links if a in pu and b in pl)
    return sum(1 for i in range(len(segs)) for j in range(i + 1, len(segs)) if segs[i][0] < segs[j][0] and segs[i][1] > segs[j][1])


def isotonic(desired: list[float], weights: list[float], gaps: list[float]) -> list[float]:
    """Least-squares positions keeping the order and the minimum gaps (pool adjacent violators)."""
    offs = [0.0]
    for gp in gaps:
        offs.append(offs[-1] + gp)
    ys = [d - o for d, o in zip(desired, offs)]
    blocks: list[list[float]] = []  # [value, weight, count]
    for y, w in zip(ys, weights):
        blocks.append([y, w, 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            v2, w2, c2 = blocks.pop()
            v1, w1, c1 = blocks.pop()
            blocks.append([(v1 * w1 + v2 * w2) / (w1 + w2), w1 + w2, c1 + c2])
    out = []
    for v, _, c in blocks:
        out += [v] * c
    return [y + o for y, o in zip(out, offs)]


@dataclass
class Layout:
    layers: list[list[str]]  # index = layer; layer 0 is the core
    chains: list[tuple[list[str], str]]  # each drawn edge: [from, dummies..., to], its kind
    width: float = 0.0


def layout(g: Graph) -> Layout:
    layer_of(g)
    reduce_edges(g)
    for n in g.nodes.values():
        n.width = box_width(n)
    top = max(n.layer for n in g.nodes.values())
    layers: list[list[str]] = [[] for _ in range(top + 1)]
    for n in sorted(g.nodes.values(), key=lambda n: (group_rank(n), n.id)):
        layers[n.layer].append(n.id)
    chains = []
    for a, b, kind in g.edges:
        chain = [a]
        for lay in range(g.nodes[a].layer - 1, g.nodes[b].layer, -1):
            d = f"~{a}>{b}@{lay}"
            g.nodes[d] = Node(d, "", "", "", "core", False, layer=lay, width=DUMMY_W, dummy=True)
            layers[lay].append(d)
            chain.append(d)
        chains.append((chain + [b], kind))
    links = [(c[i], c[i + 1]) for c, _ in chains for i in range(len(c) - 1)]
    below = {n: [b for a, b in links if a == n] for n in g.nodes}  # what n points to
    above = {n: [a for a, b in links if b == n] for n in g.nodes}  # what points to n

    # Order: barycentre sweeps (layers 1..top; the core is alone), keeping the best.
    def total(ls: list[list[str]]) -> int:
        return sum(crossings(ls[i + 1], ls[i], links) for i in range(1, top))

    best, best_cost = [list(x) for x in layers], total(layers)
    for it in range(12):
        sweep = range(top - 1, 0, -1) if it % 2 == 0 else range(2, top + 1)
        for lay in sweep:
            ref = layers[lay + 1] if it % 2 == 0 else layers[lay - 1]
            pos = {n: i for i, n in enumerate(ref)}
            nb = above if it % 2 == 0 else below

            def key(item: tuple[int, str]) -> tuple[float, int]:
                i, n = item
                ps = [pos[m] for m in nb[n] if m in pos]
                scale = (len(ref) - 1) / max(1, len(layers[lay]) - 1)
                return (sum(ps) / len(ps) if ps else i * scale, i)

            layers[lay] = [n for _, n in sorted(enumerate(layers[lay]), key=key)]
        cost = total(layers)
        if cost < best_cost:
            best, best_cost = [list(x) for x in layers], cost
    layers = best

    # Positions: pack, then pull each item towards its neighbours, keeping gaps.
    def gap(a: str, b: str) -> float:
        na, nb_ = g.nodes[a], g.nodes[b]
        between = DUMMY_GAP if na.dummy and nb_.dummy else (BOX_GAP if not na.dummy and not nb_.dummy else 12.0)
        return na.width / 2 + between + nb_.width / 2

    for lay in range(1, top + 1):
        x = 0.0
        for i, n in enumerate(layers[lay]):
            x = x + (gap(layers[lay][i - 1], n) if i else 0.0)
            g.nodes[n].x = x
    widest = max(range(1, top + 1), key=lambda lay: g.nodes[layers[lay][-1]].x)
    span = g.nodes[layers[widest][-1]].x
    for lay in range(1, top + 1):
        shift = (span - g.nodes[layers[lay][-1]].x) / 2
        for n in layers[lay]:
            g.nodes[n].x += shift
    centre = span / 2
    for it in range(40):
        order = range(1, top + 1) if it % 2 == 0 else range(top, 0, -1)
        for lay in order:
            items = layers[lay]
            desired, weights = [], []
            for n in items:
                nbrs = [m for m in below[n] + above[n] if m != g.core]
                node = g.nodes[n]
                # Towards the neighbours, and a little towards the middle (keeps it narrow).
                desired.append((sum(g.nodes[m].x for m in nbrs) + PULL * centre) / (len(nbrs) + PULL))
                weights.append(4.0 if node.dummy else 1.0)
            xs = isotonic(desired, weights, [gap(items[i], items[i + 1]) for i in range(len(items) - 1)])
            for n, x in zip(items, xs):
                g.nodes[n].x = round(x, 2)
    left = min(g.nodes[n].x - g.nodes[n].width / 2 for lay in layers[1:] for n in lay)
    right = max(g.nodes[n].x + g.nodes[n].width / 2 for lay in layers[1:] for n in lay)
    for n in g.nodes.values():
        n.x = round(n.x - left + MARGIN + 16, 1)
    return Layout(layers, chains, round(right - left + 2 * MARGIN + 32))


# ---------------------------------------------------------------------------------------
# SVG.
# ---------------------------------------------------------------------------------------


def num(v: float) -> str:
    s = f"{v:.1f}"
    return s[:-2] if s.endswith(".0") else s


def esc(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


class Svg:
    def __init__(self) -> None:
        self.out: list[str] = []
        self.labels: list[tuple[float, float, float, float, str]] = []  # for the overlap check

    def add(self, s: str) -> None:
        self.out.append(s)

    def text(self, x: float, y: float, s: str, size: float = 12.0, anchor: str = "start", mono: bool = False,
             bold: bool = False, fill: str = "#222", check: bool = True) -> float:
        w = text_width(s, size, mono, bold)
        left = {"start": x, "middle": x - w / 2, "end": x - w}[anchor]
        if check:
            self.labels.append((left, y - size * 0.8, left + w, y + size * 0.25, s))
        attrs = [f'x="{num(x)}"', f'y="{num(y)}"']
        if anchor != "start":
            attrs.append(f'text-anchor="{anchor}"')
        if size != 12.0:
            attrs.append(f'font-size="{num(size)}"')
        if mono:
            attrs.append('font-family="' + MONO + '"')
        if bold:
            attrs.append('font-weight="bold"')
        if fill != "#222":
            attrs.append(f'fill="{fill}"')
        self.add(f"  <text {' '.join(attrs)}>{esc(s)}</text>")
        return w

    def rect(self, x: float, y: float, w: float, h: float, fill: str, stroke: str, dashed: bool = False, rx: float = 6) -> None:
        dash = ' stroke-dasharray="5 3"' if dashed else ""
        self.add(f'  <rect x="{num(x)}" y="{num(y)}" width="{num(w)}" height="{num(h)}" rx="{num(rx)}" '
                 f'fill="{fill}" stroke="{stroke}" stroke-width="1.3"{dash}/>')

    def overlaps(self) -> list[str]:
        bad = []
        ls = self.labels
        for i in range(len(ls)):
            for j in range(i + 1, len(ls)):
                a, b = ls[i], ls[j]
                if a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]:
                    bad.append(f"{a[4]!r} overlaps {b[4]!r}")
        return bad


COLOURS = {k: (fill, stroke) for k, _, fill, stroke in GROUPS}
DEP, USES, DOWN, UP = "#555555", "#7b3fb5", "#1f5fbf", "#2e7d32"


def arrow(svg: Svg, x1: float, y1: float, x2: float, y2: float, colour: str, marker: str, width: float = 1.6) -> None:
    svg.add(f'  <line x1="{num(x1)}" y1="{num(y1)}" x2="{num(x2)}" y2="{num(y2)}" stroke="{colour}" '
            f'stroke-width="{num(width)}" marker-end="url(#{marker})"/>')


def draw_crates(svg: Svg, g: Graph, lay: Layout, y0: float) -> float:
    top = len(lay.layers) - 1
    core_h = 92.0
    ytop = {lv: y0 + (top - lv) * (BOX_H + LAYER_GAP) for lv in range(1, top + 1)}
    core_y = y0 + top * (BOX_H + LAYER_GAP)
    width = lay.width

    # Edges first, under the boxes: ports spread along each box's bottom and top edge.
    def next_x(chain: list[str], i: int) -> float:
        return g.nodes[chain[i]].x

    out_ports: dict[str, list[tuple[float, int]]] = {}
    in_ports: dict[str, list[tuple[float, int]]] = {}
    for k, (chain, _) in enumerate(lay.chains):
        out_ports.setdefault(chain[0], []).append((next_x(chain, 1), k))
        in_ports.setdefault(chain[-1], []).append((next_x(chain, -2), k))

    def spread(n: str, ports: list[tuple[float, int]]) -> dict[int, float]:
        node = g.nodes[n]
        ports = sorted(ports)
        usable = min(node.width * 0.7, 18.0 * (len(ports) - 1))
        return {k: node.x - usable / 2 + (usable * i / (len(ports) - 1) if len(ports) > 1 else usable / 2)
                for i, (_, k) in enumerate(ports)}

    src_x = {k: x for n, ps in out_ports.items() for k, x in spread(n, ps).items()}
    dst_x = {k: x for n, ps in in_ports.items() if n != g.core for k, x in spread(n, ps).items()}

    for k, (chain, kind) in enumerate(lay.chains):
        pts = [(src_x[k], ytop[g.nodes[chain[0]].layer] + BOX_H)]
        for d in chain[1:-1]:
            nd = g.nodes[d]
            pts += [(nd.x, ytop[nd.layer]), (nd.x, ytop[nd.layer] + BOX_H)]
        end = chain[-1]
        if end == g.core:
            last = pts[-1][0]
            pts.append((min(max(last, MARGIN + 12), width - MARGIN - 12), core_y - 1.5))
        else:
            pts.append((dst_x[k], ytop[g.nodes[end].layer] - 1.5))
        d = f"M{num(pts[0][0])} {num(pts[0][1])}"
        for i in range(1, len(pts)):
            (xa, ya), (xb, yb) = pts[i - 1], pts[i]
            if xa == xb:
                d += f" L{num(xb)} {num(yb)}"
            else:
                m = (yb - ya) / 2
                d += f" C{num(xa)} {num(ya + m)} {num(xb)} {num(yb - m)} {num(xb)} {num(yb)}"
        colour, dash, marker = (DEP, "", "dep") if kind == "dep" else (USES, ' stroke-dasharray="6 4"', "uses")
        svg.add(f'  <path d="{d}" fill="none" stroke="{colour}" stroke-width="1.3"{dash} marker-end="url(#{marker})"/>')

    # Boxes.
    for lv in range(1, top + 1):
        for n in lay.layers[lv]:
            node = g.nodes[n]
            if node.dummy:
                continue
            fill, stroke = COLOURS[node.group]
            x, y = node.x - node.width / 2, ytop[lv]
            svg.rect(x, y, node.width, BOX_H, fill, stroke, dashed=not node.cargo)
            svg.text(node.x, y + 18, node.title, TITLE_SIZE, "middle", mono=True, bold=True)
            svg.text(node.x, y + 33, node.sub, SUB_SIZE, "middle", mono=True, fill="#555")
            if node.caption:
                svg.text(node.x, y + 48, node.caption, CAPTION_SIZE, "middle")
            if node.session:
                svg.add(f'  <circle cx="{num(x + 1)}" cy="{num(y + 1)}" r="8" fill="{DOWN}"/>')
                svg.labels.append((x - 7, y - 7, x + 9, y + 9, f"S of {node.title}"))
                svg.text(x + 1, y + 5, "S", 10.5, "middle", bold=True, fill="#fff", check=False)

    # The core.
    fill, stroke = COLOURS["core"]
    svg.rect(MARGIN, core_y, width - 2 * MARGIN, core_h, fill, stroke)
    core = g.nodes[g.core]
    cx = width / 2
    svg.text(cx, core_y + 20, f"{core.title}  (src/): the core, sans-IO; no_std + alloc without default features",
             13.5, "middle", bold=True)
    plain = [m for m, f in g.modules if f is None]
    svg.text(cx, core_y + 41, "modules: " + "  ".join(plain), 11.5, "middle", mono=True)
    features: dict[str, list[str]] = {}
    for m, f in g.modules:
        if f:
            features.setdefault(f, []).append(m)
    line = "   ".join(f"feature {f}: " + "  ".join(ms) for f, ms in features.items())
    svg.text(cx, core_y + 60, line + "   (session/: the Session every host runs, below)", 11.5, "middle", mono=True)
    outside = "other crates: " + ", ".join(sorted(g.outside.get("", [])))
    outside += "".join(f"; with feature {f}: " + ", ".join(sorted(ds)) for f, ds in sorted(g.outside.items()) if f)
    svg.text(cx, core_y + 79, outside, 11, "middle", fill="#555")
    return core_y + core_h


def draw_legend(svg: Svg, g: Graph, width: float, y0: float) -> float:
    items: list[tuple[str, ...]] = [("group", k, label) for k, label, *_ in GROUPS]
    items += [("dep", "", "depends on (Cargo)"), ("uses", "", "uses a build of (wasm, native lib)"),
              ("dashed", "", "not a Cargo crate"), ("S", "", "runs a session::Session")]
    x, y = MARGIN, y0 + 14
    svg.text(x, y + 4, "Legend:", 12, bold=True)
    x += 62
    for kind, key, label in items:
        w = 28 + text_width(label, 11.5) + 22
        if x + w > width - MARGIN:
            x, y = MARGIN + 62, y + 22
        if kind == "group":
            fill, stroke = COLOURS[key]
            svg.rect(x, y - 7, 22, 14, fill, stroke, rx=3)
        elif kind == "dep":
            arrow(svg, x, y, x + 22, y, DEP, "dep", 1.3)
        elif kind == "uses":
            svg.add(f'  <line x1="{num(x)}" y1="{num(y)}" x2="{num(x + 22)}" y2="{num(y)}" stroke="{USES}" '
                    f'stroke-width="1.3" stroke-dasharray="6 4" marker-end="url(#uses)"/>')
        elif kind == "dashed":
            svg.rect(x, y - 7, 22, 14, "#ffffff", "#555", dashed=True, rx=3)
        else:
            svg.add(f'  <circle cx="{num(x + 11)}" cy="{num(y)}" r="8" fill="{DOWN}"/>')
            svg.text(x + 11, y + 4, "S", 10.5, "middle", bold=True, fill="#fff", check=False)
        svg.text(x + 28, y + 4, label, 11.5)
        x += w
    y += 24
    notes = []
    if g.implied:
        implied = ", ".join(f"{a} \u2192 {b}" for a, b in g.implied)
        notes.append(f"Not drawn, as a path of arrows leads there already: {implied}.")
    if g.dev:
        dev = "; ".join(f"{a} \u2192 {', '.join(bs)}" for a, bs in sorted(g.dev.items()))
        notes.append(f"Dev-dependencies (tests only), not drawn: {dev}.")
    for note in notes:
        for line in wrap(note, 11, width - 2 * MARGIN):
            svg.text(MARGIN, y + 4, line, 11, fill="#444")
            y += 17
    return y


def wrap(s: str, size: float, width: float) -> list[str]:
    lines, line = [], ""
    for word in s.split(" "):
        if line and text_width(line + " " + word, size) > width:
            lines.append(line)
            line = "    " + word
        else:
            line = f"{line} {word}" if line else word
    return lines + [line]


def draw_flow(svg: Svg, g: Graph, width: float, y0: float) -> float:
    cx = width / 2
    bw = 600.0
    bx = cx - bw / 2
    down_x, up_x = cx - 150, cx + 150
    svg.text(cx, y0 + 16, "Data flow: one refresh through session::Session", 17, "middle", bold=True)
    svg.text(cx, y0 + 36, "actions go down to the host (blue), events come back up with the time `now` (green); "
             "the host's one timer waits for poll_timeout()", 12, "middle", fill="#555")

    def box(y: float, h: float, group: str, lines: list[tuple[str, float, bool, bool]]) -> None:
        fill, stroke = COLOURS[group]
        svg.rect(bx, y, bw, h, fill, stroke)
        tall = sum(size + 6 for _, size, _, _ in lines) - 6
        ty = y + (h - tall) / 2 + lines[0][1] * 0.8
        for s, size, mono, bold in lines:
            svg.text(cx, ty, s, size, "middle", mono=mono, bold=bold)
            ty += size + 6

    def column(x: float, y: float, anchor: str, title: str, rows: list[tuple[str, str]], colour: str) -> None:
        """A table of names and notes beside an arrow: right of x (start) or left of it (end)."""
        names = max(text_width(name, 11.5, mono=True) for name, _ in rows)
        notes = max(text_width(note, 11) for _, note in rows)
        left = x if anchor == "start" else x - names - 8 - notes
        svg.text(left, y, title, 12, bold=True, fill=colour)
        for i, (name, note) in enumerate(rows):
            yy = y + 17 * (i + 1)
            svg.text(left, yy, name, 11.5, mono=True)
            if note:
                svg.text(left + names + 8, yy, note, 11, fill="#555")

    app_actions = [a for a in APPLICATION_ACTIONS if a in g.actions]
    host_actions = [a for a in g.actions if a not in APPLICATION_ACTIONS]

    # application
    y = y0 + 56
    box(y, 44, "tools", [("the application: a Client, a binding's metadata call, a test", 13, False, True)])
    gap1 = 70.0
    arrow(svg, down_x, y + 44, down_x, y + 44 + gap1 - 2, DOWN, "down", 2)
    arrow(svg, up_x, y + 44 + gap1, up_x, y + 46, UP, "up", 2)
    svg.text(down_x - 12, y + 44 + gap1 / 2 + 4, "request_refresh(now)", 11.5, "end", mono=True)
    svg.text(up_x + 12, y + 44 + gap1 / 2 - 4, "  ".join(app_actions), 11.5, mono=True)
    svg.text(up_x + 12, y + 44 + gap1 / 2 + 12, "(from poll_action), then metadata()", 11, fill="#555")

    # the session
    y += 44 + gap1
    # Crates that run a Session themselves, and the parts that run one through a crate (the ABI).
    via: dict[str, list[str]] = {}
    for a, b, kind in g.edges:
        if kind == "uses" and g.nodes[a].session and not g.nodes[a].cargo:
            via.setdefault(b, []).append(f"{g.nodes[a].host} ({g.nodes[a].title})")
    direct = [h for h in g.hosts if g.nodes[h].cargo and h not in via]
    through = "; ".join(f"{' and '.join(sorted(ps))} through {c}" for c, ps in sorted(via.items()))
    box(y, 100, "core", [
        ("session::Session  (src/session/, feature kafka)", 13, True, True),
        ("Cluster \u2192 Refresh: which broker, when, how many at once, which connection to keep", 11.5, False, False),
        ("one KafkaAttempt per attempt: ApiVersions, SASL, Metadata; the connection table", 11.5, False, False),
        ("handle_event(now, e)  handle_timeout(now)  poll_action()  poll_timeout()", 11.5, True, False),
    ])
    y += 100
    rows = max(len(host_actions), len(g.events) + 1)
    gap2 = 17.0 * (rows + 1) + 20
    arrow(svg, down_x, y, down_x, y + gap2 - 2, DOWN, "down", 2)
    arrow(svg, up_x, y + gap2, up_x, y + 2, UP, "up", 2)
    column(down_x - 12, y + 18, "end", "Action (poll_action)", [(a, ACTION_NOTES.get(a, "")) for a in host_actions], DOWN)
    ev_rows = [(e, EVENT_NOTES.get(e, "")) for e in g.events] + [("poll_timeout()", "\u2192 handle_timeout(now)")]
    column(up_x + 12, y + 18, "start", "Event (handle_event)", ev_rows, UP)

    # the host
    y += gap2
    box(y, 80, "adapters", [
        ("the host: " + ", ".join(direct), 12.5, True, True),
        (through, 11.5, True, False),
        ("it owns the sockets, TLS, name lookups, nonces, tokens and one timer; it decides nothing", 11.5, False, False),
    ])
    y += 80
    gap3 = 64.0
    arrow(svg, down_x, y, down_x, y + gap3 - 2, DOWN, "down", 2)
    arrow(svg, up_x, y + gap3, up_x, y + 2, UP, "up", 2)
    svg.text(down_x - 12, y + gap3 / 2 - 4, "request frames:", 11, "end", fill="#555")
    svg.text(down_x - 12, y + gap3 / 2 + 12, "ApiVersions, SASL, Metadata", 11.5, "end")
    svg.text(up_x + 12, y + gap3 / 2 - 4, "bytes, end of stream,", 11.5)
    svg.text(up_x + 12, y + gap3 / 2 + 12, "resets, I/O errors", 11.5)
    y += gap3
    box(y, 40, "testing", [("Kafka brokers: TCP, TLS, or WebSocket through stagger-bridge", 13, False, True)])
    return y + 40


def render(g: Graph) -> str:
    lay = layout(g)
    width = max(lay.width, 1000.0)
    if width > lay.width:  # centre the crates
        shift = (width - lay.width) / 2
        for n in g.nodes.values():
            n.x = round(n.x + shift, 1)
        lay.width = width
    svg = Svg()
    svg.text(width / 2, 30, "stagger: the crates and what they depend on", 17, "middle", bold=True)
    svg.text(width / 2, 50, "A \u2192 B: A depends on B; the core at the bottom. "
             "Generated by scripts/architecture.py from cargo metadata.", 12, "middle", fill="#555")
    y = draw_crates(svg, g, lay, 72)
    y = draw_legend(svg, g, width, y + 14)
    svg.add(f'  <line x1="{num(MARGIN)}" y1="{num(y + 8)}" x2="{num(width - MARGIN)}" y2="{num(y + 8)}" stroke="#cccccc"/>')
    y = draw_flow(svg, g, width, y + 28)
    height = y + MARGIN
    bad = svg.overlaps()
    if bad:
        raise Stale("labels overlap: " + "; ".join(bad))
    w, h = num(width), num(height)
    head = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
        f'font-family="{SANS}" font-size="12" fill="#222">',
        "  <title>stagger: the crates and their dependencies (top), the data flow of one refresh (bottom)</title>",
        "  <desc>Generated by scripts/architecture.py; do not edit by hand.</desc>",
        "  <defs>",
    ]
    for mid, colour in (("dep", DEP), ("uses", USES), ("down", DOWN), ("up", UP)):
        head.append(f'    <marker id="{mid}" markerWidth="10" markerHeight="8" refX="9" refY="4" orient="auto" '
                    f'markerUnits="userSpaceOnUse"><polygon points="0 0, 10 4, 0 8" fill="{colour}"/></marker>')
    head += ["  </defs>", f'  <rect x="0" y="0" width="{w}" height="{h}" fill="#ffffff"/>']
    return "\n".join(head + svg.out + ["</svg>"]) + "\n"


def text_drawing_misses(g: Graph) -> list[str]:
    doc = read(DOC_PATH)
    blocks = re.findall(r"```text\n(.*?)```", doc, re.S)
    text = "\n".join(blocks)
    return [n.id for n in g.nodes.values() if n.cargo and not n.dummy and not re.search(rf"\b{re.escape(n.id)}\b(?!-)", text)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if docs/architecture.svg is not what this would write")
    args = ap.parse_args()
    try:
        g = load()
        out = render(g)
    except Stale as e:
        print(f"architecture.py: {e}", file=sys.stderr)
        return 2
    target = os.path.join(ROOT, SVG_PATH)
    if args.check:
        try:
            with open(target, encoding="utf-8", newline="") as f:
                current = f.read()
        except FileNotFoundError:
            current = ""
        ok = True
        if current != out:
            print(f"{SVG_PATH} is stale: run python3 scripts/architecture.py", file=sys.stderr)
            ok = False
        missing = text_drawing_misses(g)
        if missing:
            print(f"the text drawing in {DOC_PATH} does not name: {', '.join(missing)}", file=sys.stderr)
            ok = False
        return 0 if ok else 1
    with open(target, "w", encoding="utf-8", newline="\n") as f:
        f.write(out)
    print(f"wrote {SVG_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
