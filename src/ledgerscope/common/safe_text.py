"""Make untrusted text safe to print in a terminal, literally.

Documents, questions and answers come from other teams' pipelines. They may
contain ANSI/OSC escape sequences, other C0/C1 control characters, or
bidirectional overrides that reorder what an engineer sees. :func:`safe`
replaces each with a visible escape (``\\x1b``, ``\\u202e``) so the text reads
literally; newlines and tabs are kept. Rich markup is a separate concern:
callers wrap the result in ``rich.text.Text`` (never markup strings).
"""

from __future__ import annotations

import json
import math
import re

# C0 controls except \t \n, DEL, C1 controls, bidi embeddings/overrides/isolates, LRM/RLM/ALM
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f\x80-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(m: re.Match) -> str:
    cp = ord(m.group(0))
    return f"\\x{cp:02x}" if cp < 0x100 else f"\\u{cp:04x}"


def safe(text: str | None, max_len: int | None = None) -> str:
    """``text`` with every control or bidi character shown as an escape; optionally truncated."""
    if text is None:
        return ""
    out = _UNSAFE.sub(_escape, text)
    if max_len is not None and len(out) > max_len:
        out = out[: max_len - 1] + "…"
    return out


#: what one line of an error message may hold before it is cut (a reason may echo a huge input)
MAX_MESSAGE = 2000


def safe_line(text: str | None, max_len: int = MAX_MESSAGE) -> str:
    """One line for stderr: escapes as :func:`safe`, newlines and tabs escaped too, length capped."""
    return safe(text, max_len).replace("\n", "\\n").replace("\t", "\\t")


def _finite(value):
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def json_text(obj, **kwargs) -> str:
    """``json.dumps`` for a terminal: valid JSON whatever the data holds.

    Non-finite floats become ``null`` (``NaN`` is not JSON); every control or bidi
    character is ``\\u``-escaped (``json`` leaves DEL, C1 controls and bidi
    overrides raw when ``ensure_ascii`` is off), so no raw escape byte reaches stdout.
    """
    text = json.dumps(_finite(obj), ensure_ascii=False, default=str, allow_nan=False, **kwargs)
    return json_escaped(text)


def json_escaped(text: str) -> str:
    """JSON text with every control or bidi character still raw in it written as ``\\uXXXX``."""
    return _UNSAFE.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text)
