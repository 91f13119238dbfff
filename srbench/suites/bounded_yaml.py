"""YAML for files a person writes, with bounds: suite files are small, so anything big is refused
before it costs memory or time.

PyYAML's ``safe_load`` builds aliases as shared objects, so a few hundred bytes of nested aliases
(a "billion laughs") load instantly and then cost gigabytes and minutes in whatever walks the
result (the schema check, the sweep). Here the document is composed into nodes first, its size
counted with every alias expanded, and only a document within :data:`MAX_NODES` is built. Keys
given twice in one mapping are refused too (plain YAML loaders keep the last silently). PyYAML has
no option for either, so both are written here, on PyYAML's composer and constructor.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, SequenceNode

# Suite files are a few kilobytes; these leave room for any sweep a person writes by hand.
MAX_BYTES = 1 << 20
MAX_NODES = 100_000

_MERGE_TAG = "tag:yaml.org,2002:merge"


class YamlProblem(ValueError):
    """A document refused; ``line`` and ``column`` (1-based) say where, when known."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None):
        super().__init__(message)
        self.line = line
        self.column = column

    @property
    def where(self) -> str:
        if self.line is None:
            return ""
        return f"line {self.line}" + (f", column {self.column}" if self.column is not None else "")


class _StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a key given twice in one mapping (merge keys ``<<`` may
    still be overridden, as YAML intends)."""

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        first_line: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == _MERGE_TAG:
                continue
            key = self.construct_object(key_node, deep=False)
            mark = key_node.start_mark
            try:
                if key in first_line:
                    raise YamlProblem(
                        f"key {key!r} given twice in one mapping (first on line {first_line[key]}); "
                        "expected each key once",
                        mark.line + 1,
                        mark.column + 1,
                    )
                first_line[key] = mark.line + 1
            except TypeError:  # an unhashable key: the base class reports it
                continue
        return super().construct_mapping(node, deep=deep)


def _expanded_size(root: Node, limit: int) -> int:
    """The number of nodes of the document with every alias expanded, counting each shared node
    once per use (iteratively, and memoized, so the count itself stays cheap); stops above
    ``limit``. A node that contains itself (a recursive alias) is refused."""
    sizes: dict[int, int] = {}
    in_progress: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if key in sizes:
            continue
        children = _children(node)
        if children_done:
            in_progress.discard(key)
            sizes[key] = min(limit + 1, 1 + sum(sizes[id(child)] for child in children))
            continue
        if key in in_progress:
            continue
        in_progress.add(key)
        stack.append((node, True))
        for child in children:
            if id(child) in in_progress:
                mark = child.start_mark
                raise YamlProblem(
                    "this node contains an alias to itself; expected no recursive aliases",
                    mark.line + 1,
                    mark.column + 1,
                )
            if id(child) not in sizes:
                stack.append((child, False))
    return sizes[id(root)]


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _unprintable(text: str, error: yaml.reader.ReaderError) -> YamlProblem:
    """The problem of a character YAML does not allow in a document (a NUL byte, a control
    character), at its line and column: PyYAML's reader says only the offset into the text,
    and its error escaped :func:`load_yaml` as a traceback."""
    before = text[: error.position]
    line = before.count("\n") + 1
    column = error.position - (before.rfind("\n") + 1) + 1
    code = error.character if isinstance(error.character, int) else ord(error.character)
    return YamlProblem(
        f"not valid YAML: character U+{code:04X} is not allowed in YAML; expected printable text", line, column
    )


def load_yaml(text: str, *, max_nodes: int = MAX_NODES) -> Any:
    """The document in ``text``, refused with :class:`YamlProblem` when it is not valid YAML, has
    more than ``max_nodes`` nodes once aliases are expanded, nests too deeply, or repeats a key.
    The caller bounds the text's size (:data:`MAX_BYTES`) before reading it whole."""
    try:
        loader = _StrictLoader(text)
    except yaml.reader.ReaderError as error:  # PyYAML checks every character up front, before any mark
        raise _unprintable(text, error) from None
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if _expanded_size(node, max_nodes) > max_nodes:
            raise YamlProblem(
                f"more than {max_nodes:,} values once aliases (*name) are expanded; "
                "expected a suite written out by hand (is it an alias bomb?)"
            )
        return loader.construct_document(node)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        problem = getattr(error, "problem", None) or str(error)
        raise YamlProblem(f"not valid YAML: {problem}", *((mark.line + 1, mark.column + 1) if mark else ())) from error
    except RecursionError:
        raise YamlProblem("nested too deeply; expected a suite written out by hand") from None
    finally:
        loader.dispose()
