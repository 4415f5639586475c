"""What users hand us, read defensively: bounded YAML files and short quotes of their values.

Everything here raises :class:`~gameday.errors.ConfigError` whose message names the file
(and the line or byte offset) and says what was expected, never a library traceback:

- :func:`read_text_file` reads bytes (at most :data:`MAX_FILE_BYTES`), refuses directories,
  devices, binary and non-UTF-8 content, and decodes UTF-8 (a UTF-8 byte-order mark is
  tolerated; UTF-16/32 ones are refused by name).
- :func:`load_yaml` parses one YAML document with a safe loader that refuses duplicate
  keys (YAML silently keeps the last one), nesting deeper than :data:`MAX_DEPTH` (the
  composer is recursive: deep nesting would end in a ``RecursionError``) and alias
  expansion beyond :data:`MAX_ALIASES` uses or :data:`MAX_NODES` expanded nodes (a
  "billion laughs" bomb is tiny on disk and huge in memory and in error messages).
- :func:`shown` quotes a user value in a message, cut to about :data:`QUOTE_LIMIT`
  characters however large or deeply nested the value is.
"""

from __future__ import annotations

import codecs
import os
import reprlib
import stat
from pathlib import Path
from typing import Any

import yaml
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, Node, SequenceNode

from gameday.errors import ConfigError

MAX_FILE_BYTES = 1 << 20
"""1 MiB: the default topology is under 2 KiB; 250 regions fit in well under 100 KiB."""
MAX_DEPTH = 32
"""Nesting levels; a topology needs 5 (top, regions, a region, its labels, a value)."""
MAX_ALIASES = 1000
"""Alias (``*name``) uses in one file: generous for anchors shared between regions."""
MAX_NODES = 100_000
"""Nodes after expanding every alias: 250 regions with labels need about 10,000."""
QUOTE_LIMIT = 80
"""Characters of a user value quoted in a message."""

_REPR = reprlib.Repr()
_REPR.maxlevel = 3
_REPR.maxlist = _REPR.maxtuple = _REPR.maxset = _REPR.maxdict = 6
_REPR.maxstring = _REPR.maxother = QUOTE_LIMIT


def shown(value: object, limit: int = QUOTE_LIMIT) -> str:
    """``repr(value)`` for a message, at most about *limit* characters.

    reprlib bounds the work too: a huge (or alias-expanded) value is never rendered in
    full only to be cut afterwards.
    """
    text = _REPR.repr(value)
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return text


# -- files -------------------------------------------------------------------------------------
_FOREIGN_BOMS = (
    (codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"),  # before UTF-16: same prefix
    (codecs.BOM_UTF16_LE, "UTF-16"), (codecs.BOM_UTF16_BE, "UTF-16"),
)


def _where(data: bytes, offset: int) -> str:
    line = data.count(b"\n", 0, offset) + 1
    column = offset - (data.rfind(b"\n", 0, offset) + 1) + 1
    return f"byte offset {offset} (line {line}, column {column})"


def read_text_file(path: Path, what: str = "file", limit: int = MAX_FILE_BYTES) -> str:
    """Read *path* as UTF-8 text, refusing what cannot be a hand-written config file.

    Args:
        what: what the file is for, in messages (``"topology file"``).
        limit: the largest size accepted, in bytes.

    Raises:
        ConfigError: missing, a directory or device, unreadable, larger than *limit*,
            binary or not UTF-8; the message names the file and, for content, the offset.
    """
    try:
        st = path.stat()
    except FileNotFoundError as exc:
        raise ConfigError(f"{path}: {what} does not exist", source=str(path)) from exc
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read {what} ({exc.strerror})", source=str(path)) from exc
    if stat.S_ISDIR(st.st_mode):
        raise ConfigError(f"{path}: is a directory, expected a {what}", source=str(path))
    if not stat.S_ISREG(st.st_mode):
        # A FIFO would block and /dev/zero never ends: only regular files are read.
        raise ConfigError(f"{path}: is not a regular file (a device, FIFO or socket), expected a {what}",
                          source=str(path))
    if st.st_size > limit:
        raise ConfigError(f"{path}: {st.st_size} bytes, expected a {what} of at most {limit} bytes",
                          source=str(path))
    try:
        with path.open("rb") as fh:
            data = fh.read(limit + 1)  # the file may grow between stat and read
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read {what} ({exc.strerror})", source=str(path)) from exc
    if len(data) > limit:
        raise ConfigError(f"{path}: more than {limit} bytes, expected a {what} of at most {limit} bytes",
                          source=str(path))
    for bom, name in _FOREIGN_BOMS:
        if data.startswith(bom):
            raise ConfigError(f"{path}: starts with a {name} byte-order mark; expected UTF-8 text "
                              "(save the file as UTF-8)", source=str(path))
    data = data.removeprefix(codecs.BOM_UTF8)  # what some Windows editors write; harmless
    nul = data.find(b"\x00")
    if nul >= 0:
        raise ConfigError(f"{path}: NUL byte at {_where(data, nul)}: a binary file, expected a {what} "
                          "in UTF-8 text", source=str(path))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path}: not UTF-8: byte 0x{data[exc.start]:02x} at {_where(data, exc.start)} ({exc.reason}); "
            f"expected a {what} in UTF-8 text (save the file as UTF-8)", source=str(path)) from exc


# -- YAML --------------------------------------------------------------------------------------
class _BoundedLoader(yaml.SafeLoader):
    """A safe loader that refuses duplicate keys, deep nesting and too many aliases."""

    def __init__(self, text: str, name: str) -> None:
        super().__init__(text)
        self.name = name  # marks (and so every error) name the file, not "<unicode string>"
        self._depth = 0
        self._aliases = 0

    def _refuse(self, line: int, message: str) -> ConfigError:
        return ConfigError(f"{self.name}:{line}: {message}", source=self.name)

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        line = event.start_mark.line + 1 if event.start_mark is not None else 0
        if isinstance(event, AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise self._refuse(line, f"more than {MAX_ALIASES} alias (*name) uses; "
                                   "expected a hand-written topology (is this an alias bomb?)")
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise self._refuse(line,
                                   f"nested deeper than {MAX_DEPTH} levels; a topology needs at most 5")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        first: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # `<<: *defaults` keys may be overridden: that is what merging is for
            key = self.construct_object(key_node, deep=False)
            try:
                seen = first.get(key)
            except TypeError:
                continue  # an unhashable key: the base constructor reports it with its mark
            line = key_node.start_mark.line + 1
            if seen is not None:
                raise self._refuse(line, f"duplicate key {shown(key)} (first at line {seen}); expected each key "
                                   "once (YAML would silently keep the last value)")
            first[key] = line
        return super().construct_mapping(node, deep=deep)


def _check_expansion(root: Node, name: str) -> None:
    """Count the nodes the tree has once every alias is expanded, without expanding it.

    Iterative (no recursion limit) and memoised per node, so a bomb costs its size on
    disk, not its expanded size. A node that contains itself is refused too.
    """
    size: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        kids: list[Node] = []
        if isinstance(node, SequenceNode):
            kids = list(node.value)
        elif isinstance(node, MappingNode):
            kids = [n for pair in node.value for n in pair]
        if children_done:
            on_path.discard(key)
            size[key] = 1 + sum(size[id(k)] for k in kids)
            if size[key] > MAX_NODES:
                raise ConfigError(f"{name}:{node.start_mark.line + 1}: aliases expand to more than {MAX_NODES} "
                                  "nodes; expected a hand-written topology (is this an alias bomb?)", source=name)
            continue
        if key in size:
            continue
        on_path.add(key)
        stack.append((node, True))
        for k in kids:
            if id(k) in on_path:
                raise ConfigError(f"{name}:{k.start_mark.line + 1}: an alias refers to a node that contains it "
                                  "(a recursive structure); expected plain data", source=name)
            if id(k) not in size:
                stack.append((k, False))


def _yaml_message(exc: yaml.YAMLError, text: str) -> str:
    if isinstance(exc, yaml.reader.ReaderError):
        code = exc.character if isinstance(exc.character, int) else 0
        line = text.count("\n", 0, exc.position) + 1
        column = exc.position - (text.rfind("\n", 0, exc.position) + 1) + 1
        return f"line {line}, column {column}: control character #x{code:04x} is not allowed in YAML"
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        context = f" ({exc.context})" if exc.context and exc.problem else ""
        return f"{where}{exc.problem or exc.context}{context}"
    return shown(str(exc), 200)


def load_yaml(text: str, name: str) -> Any:
    """Parse one YAML document of *text* (read from the file *name*) into plain data.

    Raises:
        ConfigError: not valid YAML, several documents, a duplicate key, too deep, or
            too many aliases; names the file and the line.
    """
    try:
        loader = _BoundedLoader(text, name)
    except yaml.YAMLError as exc:  # the reader checks every character up front
        raise ConfigError(f"{name}: not valid YAML: {_yaml_message(exc, text)}", source=name) from exc
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_expansion(node, name)
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{name}: not valid YAML: {_yaml_message(exc, text)}", source=name) from exc
    finally:
        loader.dispose()


def load_yaml_file(path: str | os.PathLike[str], what: str = "file") -> Any:
    """:func:`read_text_file` then :func:`load_yaml`."""
    p = Path(path)
    return load_yaml(read_text_file(p, what), str(p))
