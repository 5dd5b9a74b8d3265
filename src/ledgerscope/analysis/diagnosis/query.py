"""The record filter language shared by ``ledgerscope export --where`` and the TUI's filter bar.

A filter is one DuckDB boolean expression over the view ``record_view``
(:func:`ledgerscope.analysis.diagnosis.record_view.build_record_view`): one
row per record, every column of the ``records`` table plus the diagnosis:

* ``step`` (integer, 0 = pass, 1-10 the ten steps), ``step_name``, ``label``;
* ``flags`` (list of strings, e.g. ``list_contains(flags, 'support-recovered')``);
* ``reversal`` (boolean): this question's ``support_packed`` or
  ``answer_verdict`` differs across the phases of the same arm (the
  definition :mod:`ledgerscope.analysis.reversals` uses).

Examples: ``step = 7``, ``arm = 'candidate' AND NOT support_packed``,
``reversal AND segment = 'rule-exception'``, ``qid LIKE 'temp-%'``. An empty
filter selects every record.

:func:`validate_predicate` admits only a single expression that reads
``record_view``'s own columns. It is checked with DuckDB's own tokenizer and
parser (``duckdb.tokenize``, ``json_serialize_sql``), not by pattern matching
alone: statement separators, unbalanced parentheses, subqueries (``EXISTS``,
``IN (SELECT ...)``), prepared-statement parameters and functions that read
files or settings are refused, then every column reference is checked against
the view and the expression is bound to make sure it is boolean. A keyword
and function-name denylist backs the parser check up. The validated
predicate is DuckDB's own rendering of the expression (comments and layout
dropped), used as ``SELECT ... FROM record_view WHERE (<predicate>)``.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ledgerscope.analysis.diagnosis.record_view import VIEW
from ledgerscope.common.errors import InputError, Problem

if TYPE_CHECKING:
    from duckdb import DuckDBPyConnection

DEFAULT_ORDER = "arm, phase_offset, qid"

_PREFIX = f"SELECT * FROM {VIEW} WHERE ("
# the predicate on lines of its own, so a trailing ``--`` comment cannot swallow the closing parenthesis
_OPEN, _CLOSE = _PREFIX + "\n", "\n)"

#: keywords that never belong in a row predicate (statements, clauses, subqueries)
_DENY_KEYWORDS = frozenset(
    {
        "SELECT",
        "FROM",
        "WITH",
        "TABLE",
        "VALUES",
        "UNION",
        "INTERSECT",
        "EXCEPT",
        "ORDER",
        "LIMIT",
        "OFFSET",
        "GROUP",
        "HAVING",
        "QUALIFY",
        "WINDOW",
        "RETURNING",
        "COPY",
        "ATTACH",
        "DETACH",
        "INSTALL",
        "LOAD",
        "PRAGMA",
        "SET",
        "RESET",
        "CALL",
        "CREATE",
        "DROP",
        "INSERT",
        "UPDATE",
        "DELETE",
        "ALTER",
        "EXPORT",
        "IMPORT",
        "VACUUM",
        "CHECKPOINT",
        "USE",
        "SUMMARIZE",
        "DESCRIBE",
        "SHOW",
        "EXPLAIN",
        "PIVOT",
        "UNPIVOT",
        "MERGE",
        "TRUNCATE",
        "ANALYZE",
        "EXECUTE",
        "PREPARE",
        "DEALLOCATE",
        "BEGIN",
        "COMMIT",
        "ROLLBACK",
    }
)
#: function names (scalar or table) that read files, the network, the catalog or settings
_DENY_FUNCTION = re.compile(
    r"^(read_\w*|glob|query|query_table|sniff_csv|parquet_\w*|\w*_scan|iceberg_\w*|delta_\w*|sqlite_\w*|"
    r"postgres_\w*|mysql_\w*|http\w*|getenv|current_setting|set_variable|getvariable|duckdb_\w*|pragma_\w*|"
    r"which_secret|load_aws_credentials|nextval|currval)$",
    re.IGNORECASE,
)
#: calls whose SQL-standard syntax uses FROM inside the parentheses
_FROM_CALLS = frozenset({"extract", "substring", "trim", "overlay"})


def _problem(reason: str, source: str) -> InputError:
    return InputError(Problem(source, None, "where", reason))


# ---------------------------------------------------------------------------
# the view


def view_columns(con: DuckDBPyConnection) -> list[str]:
    """The columns a predicate may name, in the view's order."""
    import duckdb

    try:
        return [r[0] for r in con.execute(f"DESCRIBE {VIEW}").fetchall()]
    except duckdb.CatalogException:
        raise InputError(
            Problem(VIEW, None, "view", "no record_view on this connection (call build_record_view first)")
        ) from None


# ---------------------------------------------------------------------------
# validation


def validate_predicate(con: DuckDBPyConnection, predicate: str, source: str = "filter") -> str:
    """The normalised predicate, or :class:`InputError` (field ``where``) saying why not.

    ``source`` names where the predicate came from in the message. An empty or
    blank predicate returns ``""`` (all rows). Order of checks: tokens
    (statement separators, parentheses, parameters), DuckDB's parse tree
    (one SELECT over the view; no subqueries, windows or denied functions;
    known columns only), the keyword/function denylist, then binding
    (the expression must bind in a WHERE clause and be BOOLEAN).
    """
    import duckdb

    if predicate is None or not predicate.strip():
        return ""
    text = predicate.strip()
    denied = _check_tokens(text, source)
    query = _OPEN + text + _CLOSE
    try:
        tree = _serialize(con, query, source)
    except InputError:
        if denied:  # "COPY ..." is a syntax error here, but the denylist says why more plainly
            raise _problem(denied, source) from None
        raise
    try:
        statements = con.extract_statements(query)
    except duckdb.Error as exc:
        raise _problem(_short_error(exc), source) from None
    if len(statements) != 1:
        raise _problem("one expression only: the predicate may not hold more than one statement", source)
    node = _single_select(tree, source)
    where = node.get("where_clause")
    if where is None:
        raise _problem("not an expression", source)
    columns = view_columns(con)
    _check_expression(where, {c.lower() for c in columns}, columns, source)
    if denied:
        raise _problem(denied, source)
    normalised = _render(con, tree, text)
    _check_binds(con, normalised, source)
    return normalised


def _check_tokens(text: str, source: str) -> str | None:
    """Tokenizer checks: no statement separator, balanced parentheses, no parameters.

    Returns the denylist's objection (a keyword or function that has no place
    in a row predicate) or None; the caller reports it after the parser's own
    checks, which give the more precise reason when they apply.
    """
    import duckdb

    try:
        tokens = duckdb.tokenize(text)
    except Exception as exc:  # the tokenizer itself rarely fails; the parser reports it better
        raise _problem(f"cannot tokenize: {_first_line(str(exc))}", source) from None
    calls: list[str] = []  # the function (or "") each open parenthesis belongs to
    prev = ""
    denied: str | None = None
    for i, (offset, kind) in enumerate(tokens):
        end = tokens[i + 1][0] if i + 1 < len(tokens) else len(text)
        tok = text[offset:end].strip()
        name = getattr(kind, "name", str(kind)).lower()
        if name in ("string_const", "comment"):
            continue
        if name == "operator":
            for ch in tok:
                if ch == ";":
                    raise _problem("one expression only: ';' would start another statement", source)
                if ch == "(":
                    calls.append(prev)
                elif ch == ")":
                    if not calls:
                        raise _problem(f"unbalanced ')' at character {offset + 1}", source)
                    calls.pop()
            if tok.startswith(("?", "$")):
                raise _problem("parameters ('?', '$1') are not allowed in a filter", source)
            prev = ""
            continue
        word = tok.strip('"').upper()
        prev = tok.strip('"').lower()
        if denied is not None or (word == "FROM" and calls and calls[-1] in _FROM_CALLS):
            continue
        if name == "keyword" and word in _DENY_KEYWORDS:
            denied = (
                f"{word} is not allowed: a filter is one expression over {VIEW}'s columns "
                "(no statements or subqueries)"
            )
        elif name == "identifier" and _DENY_FUNCTION.match(prev) and _is_call(tokens, i, text):
            denied = f"function {prev}() is not allowed in a filter"
    if calls:
        raise _problem("unbalanced '(': a closing parenthesis is missing", source)
    return denied


def _is_call(tokens: Sequence[tuple[int, Any]], i: int, text: str) -> bool:
    if i + 1 >= len(tokens):
        return False
    offset = tokens[i + 1][0]
    return text[offset : offset + 1] == "("


def _serialize(con: DuckDBPyConnection, query: str, source: str) -> dict[str, Any]:
    raw = con.execute("SELECT json_serialize_sql(?)", [query]).fetchall()[0][0]
    tree = json.loads(raw)
    if tree.get("error"):
        msg = tree.get("error_message") or "cannot parse"
        pos = tree.get("position")
        if pos is not None and str(pos).isdigit():
            at = int(pos) - len(_OPEN) + 1
            if 1 <= at <= len(query) - len(_OPEN) - len(_CLOSE) + 1:
                msg = f"{msg} (at character {at})"
        raise _problem(_first_line(msg), source)
    return tree


def _single_select(tree: dict[str, Any], source: str) -> dict[str, Any]:
    stmts = tree.get("statements") or []
    if len(stmts) != 1:
        raise _problem("one expression only", source)
    node = stmts[0].get("node") or {}
    frm = node.get("from_table") or {}
    sel = node.get("select_list") or []
    shape_ok = (
        node.get("type") == "SELECT_NODE"
        and not node.get("modifiers")
        and not (node.get("cte_map") or {}).get("map")
        and not node.get("group_expressions")
        and not (node.get("group_sets") or [])
        and node.get("having") is None
        and node.get("qualify") is None
        and node.get("sample") is None
        and frm.get("type") == "BASE_TABLE"
        and frm.get("table_name") == VIEW
        and not frm.get("alias")
        and not frm.get("schema_name")
        and not frm.get("catalog_name")
        and len(sel) == 1
        and sel[0].get("class") == "STAR"
        and not sel[0].get("exclude_list")
        and not sel[0].get("replace_list")
        and not sel[0].get("columns")
    )
    if not shape_ok:
        raise _problem("not a single boolean expression", source)
    return node


def _walk(node: Any, bound: frozenset[str]) -> Iterator[tuple[dict[str, Any], frozenset[str]]]:
    """Every expression object under ``node`` with the lambda parameters in scope there."""
    if isinstance(node, list):
        for item in node:
            yield from _walk(item, bound)
        return
    if not isinstance(node, dict):
        return
    if node.get("class") == "LAMBDA":
        params = frozenset(c.lower() for _, c in _column_refs(node.get("lhs")))
        yield node, bound
        yield from _walk(node.get("expr"), bound | params)
        return
    if "class" in node or "type" in node:
        yield node, bound
    for value in node.values():
        if isinstance(value, dict | list):
            yield from _walk(value, bound)


def _column_refs(node: Any) -> Iterator[tuple[dict[str, Any], str]]:
    for expr, _ in _walk(node, frozenset()):
        if expr.get("class") == "COLUMN_REF" and expr.get("column_names"):
            yield expr, str(expr["column_names"][-1])


_QUERY_NODES = frozenset({"SELECT_NODE", "SET_OPERATION_NODE", "RECURSIVE_CTE_NODE", "CTE_NODE", "SUBQUERY"})


def _check_expression(where: dict[str, Any], known: set[str], columns: list[str], source: str) -> None:
    for expr, bound in _walk(where, frozenset()):
        cls, typ = expr.get("class"), expr.get("type")
        if cls == "SUBQUERY" or typ in _QUERY_NODES or "from_table" in expr:
            raise _problem(f"subqueries are not allowed: a filter reads only {VIEW}'s own columns", source)
        if cls == "PARAMETER":
            raise _problem("parameters ('?', '$1') are not allowed in a filter", source)
        if cls == "WINDOW":
            raise _problem("window functions are not allowed in a filter", source)
        if cls == "FUNCTION":
            name = str(expr.get("function_name") or "")
            if expr.get("schema") or expr.get("catalog"):
                raise _problem(f"qualified function names are not allowed: {name}", source)
            if _DENY_FUNCTION.match(name):
                raise _problem(f"function {name}() is not allowed in a filter", source)
        if cls == "COLUMN_REF":
            names = [str(n) for n in expr.get("column_names") or []]
            if not names:
                continue
            head = names[0].lower()
            if len(names) >= 2 and head == VIEW:
                names, head = names[1:], names[1].lower()
            if head in bound:
                continue
            if head not in known:
                raise _problem(_unknown_column(".".join(names), columns), source)


def _unknown_column(name: str, columns: list[str]) -> str:
    close = difflib.get_close_matches(name.lower(), [c.lower() for c in columns], n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    preferred = [
        "qid",
        "arm",
        "phase",
        "step",
        "label",
        "segment",
        "answer_verdict",
        "support_packed",
        "flags",
        "reversal",
    ]
    few = [c for c in preferred if c in columns] or columns[:10]
    return f"unknown column {name!r}{hint} (columns include {', '.join(few)}; {len(columns)} in all)"


def _render(con: DuckDBPyConnection, tree: dict[str, Any], text: str) -> str:
    """DuckDB's rendering of the WHERE expression when it parses back to the same tree, else ``text``."""
    try:
        sql = con.execute("SELECT json_deserialize_sql(?)", [json.dumps(tree)]).fetchall()[0][0]
    except Exception:
        return text
    head = f"SELECT * FROM {VIEW} WHERE "
    if not isinstance(sql, str) or not sql.startswith(head):
        return text
    rendered = sql[len(head) :].strip()
    try:
        again = json.loads(
            con.execute("SELECT json_serialize_sql(?)", [_OPEN + rendered + _CLOSE]).fetchall()[0][0]
        )
    except Exception:
        return text
    if again.get("error") or _strip_locations(again) != _strip_locations(tree):
        return text
    if rendered.startswith("(") and rendered.endswith(")") and _balanced_inner(rendered[1:-1]):
        rendered = rendered[1:-1]
    return rendered


def _balanced_inner(s: str) -> bool:
    """True when ``s`` (outer parentheses removed) never closes more than it opened (ignoring strings)."""
    depth = 0
    quote: str | None = None
    for ch in s:
        if quote:
            if ch == quote:
                quote = None
            continue
        if ch in "'\"":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                return False
    return depth == 0 and quote is None


def _strip_locations(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _strip_locations(v) for k, v in node.items() if not k.startswith("query_location")}
    if isinstance(node, list):
        return [_strip_locations(v) for v in node]
    return node


def _check_binds(con: DuckDBPyConnection, predicate: str, source: str) -> None:
    import duckdb

    try:
        # in a WHERE clause, so aggregates and window functions are refused by the binder too
        rows = con.execute(
            f"DESCRIBE SELECT ({predicate}) AS _ls_predicate FROM {VIEW} WHERE ({predicate})"
        ).fetchall()
    except duckdb.Error as exc:
        raise _problem(_short_error(exc), source) from None
    kind = str(rows[0][1]) if rows else "?"
    if kind.upper() != "BOOLEAN":
        raise _problem(f"the filter must be a boolean expression, but it is {kind}", source)


def _first_line(msg: str) -> str:
    return (msg.strip().splitlines() or [""])[0]


def _short_error(exc: Exception) -> str:
    """DuckDB's message, first line, without its error-class prefix (and with LINE context dropped)."""
    msg = _first_line(str(exc))
    msg = re.sub(r"^(Parser|Binder|Catalog|Conversion|Invalid Input|Not implemented) Error:\s*", "", msg)
    return msg or type(exc).__name__


# ---------------------------------------------------------------------------
# selecting

_ORDER_ITEM = r"[A-Za-z_][A-Za-z0-9_]*(\s+(ASC|DESC))?"
_ORDER = re.compile(rf"^\s*{_ORDER_ITEM}(\s*,\s*{_ORDER_ITEM})*\s*$", re.IGNORECASE)


def where_sql(normalised: str) -> str:
    """`` WHERE (<predicate>)`` for a validated predicate (empty: no clause)."""
    return f" WHERE (\n{normalised}\n)" if normalised else ""


def _order(con: DuckDBPyConnection, order: str | None) -> str:
    if not order:
        return " ORDER BY arm, phase, qid"
    if not _ORDER.match(order):
        raise InputError(Problem("order", None, "order", f"not a column list: {order!r}"))
    known = {c.lower() for c in view_columns(con)}
    for part in order.split(","):
        col = part.split()[0].lower()
        if col not in known:
            raise InputError(Problem("order", None, "order", f"unknown column {col!r}"))
    return f" ORDER BY {order}, arm, phase, qid"


def select_records(
    con: DuckDBPyConnection, predicate: str, limit: int | None = None, order: str | None = DEFAULT_ORDER
) -> list[dict[str, Any]]:
    """The ``record_view`` rows the predicate selects (validated here), as dicts.

    ``order`` is a list of view columns (each optionally ``ASC``/``DESC``);
    ``arm, phase, qid`` is appended to it so the order is total.
    """
    normalised = validate_predicate(con, predicate)
    sql = f"SELECT * FROM {VIEW}{where_sql(normalised)}{_order(con, order)}"
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    return fetch_dicts(run_query(con, sql))


def count_records(con: DuckDBPyConnection, predicate: str) -> int:
    """How many ``record_view`` rows the predicate selects."""
    normalised = validate_predicate(con, predicate)
    return int(run_query(con, f"SELECT count(*) FROM {VIEW}{where_sql(normalised)}").fetchall()[0][0])


def fetch_dicts(cursor: DuckDBPyConnection) -> list[dict[str, Any]]:
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def run_query(con: DuckDBPyConnection, sql: str, params: list[Any] | None = None) -> DuckDBPyConnection:
    """Execute a query built on a validated predicate (its result is ready to fetch).

    An error only evaluation finds (a cast that fails on some row) is still the
    filter's fault and is reported as one.
    """
    import duckdb

    try:
        return con.execute(sql, params or [])
    except duckdb.Error as exc:
        raise _problem(_short_error(exc), "filter") from None
