"""Where each key of a TOML document is written: tomllib parses values but keeps no positions.

:func:`key_lines` maps every dotted key path (``"retrieval.hnsw.M"``) to the 1-based line that
defines it: a ``key = value`` line under its ``[table]`` header, a dotted key, a key inside an
inline table (the line of that table's key), and every ``[table]`` header itself. It reads only as
much TOML as it takes to find keys: strings (basic, literal, multi-line), arrays that span lines
and comments are skipped whole. The text is assumed to be TOML that tomllib already accepted.
"""

from __future__ import annotations

from collections.abc import Mapping

_BARE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


class _Scanner:
    def __init__(self, text: str) -> None:
        self.text, self.i, self.line = text, 0, 1
        self.found: dict[str, int] = {}

    def peek(self, n: int = 1) -> str:
        return self.text[self.i : self.i + n]

    def advance(self, n: int = 1) -> None:
        self.line += self.text.count("\n", self.i, self.i + n)
        self.i += n

    def spaces(self, newlines: bool = False) -> None:
        """Skip blanks (and, inside arrays, newlines and comments)."""
        while self.i < len(self.text):
            c = self.text[self.i]
            if c in " \t\r" or (newlines and c == "\n"):
                self.advance()
            elif newlines and c == "#":
                self.to_line_end()
            else:
                return

    def to_line_end(self) -> None:
        end = self.text.find("\n", self.i)
        self.i = len(self.text) if end < 0 else end

    def string(self) -> str:
        """A string at the cursor (any of TOML's four kinds); returns its text, escapes left as written."""
        quote = self.peek()
        if self.peek(3) == quote * 3:
            self.advance(3)
            end = self.text.find(quote * 3, self.i)
            while quote == '"' and end > 0 and _escaped(self.text, end):
                end = self.text.find(quote * 3, end + 1)
            end = len(self.text) if end < 0 else end
            while self.text[end + 3 : end + 4] == quote:  # up to two quotes may close the content
                end += 1
            body = self.text[self.i : end]
            self.advance(end + 3 - self.i)
            return body
        self.advance()
        start = self.i
        while self.i < len(self.text) and self.text[self.i] != quote:
            self.advance(2 if quote == '"' and self.text[self.i] == "\\" else 1)
        body = self.text[start : self.i]
        self.advance()
        return body

    def key(self) -> list[str]:
        """A (dotted) key at the cursor."""
        parts = []
        while True:
            self.spaces()
            if self.peek() in ('"', "'"):
                parts.append(self.string())
            else:
                start = self.i
                while self.i < len(self.text) and self.text[self.i] in _BARE:
                    self.i += 1
                parts.append(self.text[start : self.i])
            self.spaces()
            if self.peek() != ".":
                return parts
            self.advance()

    def value(self, path: list[str], line: int) -> None:
        """Skip one value; the keys of an inline table are recorded at ``line``."""
        c = self.peek()
        if c in ('"', "'"):
            self.string()
        elif c == "[":
            self.advance()
            self.spaces(newlines=True)
            while self.peek() and self.peek() != "]":
                self.value(path, line)
                self.spaces(newlines=True)
                if self.peek() == ",":
                    self.advance()
                    self.spaces(newlines=True)
            self.advance()
        elif c == "{":
            self.advance()
            self.spaces()
            while self.peek() and self.peek() != "}":
                sub = [*path, *self.key()]
                self.found.setdefault(".".join(sub), line)
                self.advance()  # '='
                self.spaces()
                self.value(sub, line)
                self.spaces()
                if self.peek() == ",":
                    self.advance()
                    self.spaces()
            self.advance()
        else:
            while self.i < len(self.text) and self.text[self.i] not in ",]}\n#":
                self.i += 1

    def document(self) -> dict[str, int]:
        table: list[str] = []
        while self.i < len(self.text):
            self.spaces()
            c = self.peek()
            if c == "\n":
                self.advance()
            elif c == "#" or not c:
                self.to_line_end()
            elif c == "[":
                double = self.peek(2) == "[["
                self.advance(2 if double else 1)
                table = self.key()
                self.found.setdefault(".".join(table), self.line)
                self.advance(2 if double else 1)
                self.to_line_end()
            else:
                line = self.line
                path = [*table, *self.key()]
                for n in range(len(table) + 1, len(path) + 1):  # a dotted key defines its tables too
                    self.found.setdefault(".".join(path[:n]), line)
                self.advance()  # '='
                self.spaces()
                self.value(path, line)
                self.to_line_end()
        return self.found


def _escaped(text: str, at: int) -> bool:
    """Whether the character at ``at`` follows an odd number of backslashes."""
    n = 0
    while at - n - 1 >= 0 and text[at - n - 1] == "\\":
        n += 1
    return n % 2 == 1


def key_lines(text: str) -> dict[str, int]:
    """Every dotted key path of a TOML document with the line that defines it (1-based)."""
    try:
        return _Scanner(text).document()
    except IndexError:  # not TOML after all: what was found so far
        return {}


def line_of(lines: Mapping[str, int], field: str) -> int | None:
    """The line of ``field``, else of the nearest table above it that is written (None: neither is)."""
    parts = field.split(".")
    while parts:
        found = lines.get(".".join(parts))
        if found is not None:
            return found
        parts.pop()
    return None
