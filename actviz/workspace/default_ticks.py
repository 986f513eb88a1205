"""Which layers a fresh model gets ticked (:func:`default_layers`), and its module-tree walks."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from actviz.core.tree import ModuleTree

#: Default ticks are capped at this many layers so the first run stays quick to look at.
DEFAULT_TICK_LIMIT = 8
#: Generic containers: their outputs are their last child's output, so they are walked through.
_CONTAINERS = {"Sequential", "ModuleList", "ModuleDict"}
#: A text model's default ticks are every block (spread over this many when there are more).
DEFAULT_BLOCK_LIMIT = 48


def default_layers(tree: ModuleTree, limit: int = DEFAULT_TICK_LIMIT) -> list[str]:
    """A few layers to tick on a fresh model: at most ``limit`` block outputs, spread evenly, and
    the last leaf; a text model gets every transformer block (up to :data:`DEFAULT_BLOCK_LIMIT`)."""
    leaves = tree.leaves()
    if not leaves or leaves == [""]:
        return [""] if "" in tree else []
    head = leaves[-1]
    # A text model (an embedding first): its blocks, the children of its outermost block lists.
    text_blocks = _listed_blocks(tree) if "Embedding" in tree[leaves[0]].type_name else []
    if text_blocks:
        picks = [b for b in text_blocks if b != head]
        return _in_tree_order(tree, _spread(picks, DEFAULT_BLOCK_LIMIT) + [head])
    # Containers are walked through; any other module with children is a block.
    blocks = _walk_blocks(tree, lambda node: None if node.type_name in _CONTAINERS else [node.name])
    if len(blocks) < 2:
        # One wrapper with all inside (a Hugging Face ``vit``): its blocks, not its first conv.
        listed = _listed_blocks(tree)
        blocks = listed if len(listed) >= 2 else blocks
    if len(blocks) > limit - 1:
        # Too many blocks (ResNet's 8 BasicBlocks): show the stages that group them instead.
        parents = list(dict.fromkeys(tree[b].parent or "" for b in blocks))
        if len(parents) >= 2 and "" not in parents:
            blocks = parents
    if len(blocks) >= 2:
        picks = blocks
    else:
        picks = [n for n in leaves if "Conv" in tree[n].type_name] if len(leaves) > limit else []
        picks = picks or leaves
    picks = [p for p in picks if p != head]
    return _in_tree_order(tree, _spread(picks, limit - 1) + [head])


def _in_tree_order(tree: ModuleTree, names: list[str]) -> list[str]:
    """``names`` without repeats, in tree order."""
    order = {node.name: i for i, node in enumerate(tree.nodes)}
    return sorted(dict.fromkeys(names), key=order.__getitem__)


def _walk_blocks(tree: ModuleTree, pick: Callable[[Any], list[str] | None]) -> list[str]:
    """Names ``pick(node)`` gives for modules with children, top down (None: walk into them)."""
    blocks: list[str] = []

    def walk(name: str) -> None:
        for child in tree[name].children:
            node = tree[child]
            if node.is_leaf:
                continue
            found = pick(node)
            if found is None:
                walk(child)
            else:
                blocks.extend(found)

    walk("")
    return blocks


def _listed_blocks(tree: ModuleTree) -> list[str]:
    """The children with children of the outermost ``ModuleList``s."""

    def pick(node: Any) -> list[str] | None:
        inner = [c for c in node.children if not tree[c].is_leaf]
        return inner if node.type_name == "ModuleList" and inner else None

    return _walk_blocks(tree, pick)


def _spread(items: list[str], n: int) -> list[str]:
    if n <= 0:
        return []
    if len(items) <= n:
        return list(items)
    step = (len(items) - 1) / max(n - 1, 1)
    return [items[round(i * step)] for i in range(n)]
