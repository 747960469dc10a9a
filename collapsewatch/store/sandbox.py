"""User SQL, read-only by construction: a parse-tree check, a throwaway connection, a time and a size limit.

A person's query (``collapsewatch sql``, the dashboard's SQL page) passes two independent barriers:

1. **Only plain SELECT trees.** DuckDB parses the text (``json_serialize_sql``, which serialises SELECT
   statements only: ``EXPLAIN [ANALYZE]``, ``COPY``, ``ATTACH``, ``SET``, ``PRAGMA``, DDL, ``INSTALL``/``LOAD``,
   ``CALL``, ``PIVOT`` statements are refused there, however they are wrapped). The tree is then walked:
   table functions must be pure generators (``range``, ``unnest`` …; no ``query()``, ``query_table()``,
   ``read_*``, ``glob``, ``checkpoint``), scalar functions must not be one of the few with side effects
   (``json_execute_serialized_sql``, ``nextval``, ``write_log`` …) and tables must be plain names (a quoted
   path such as ``FROM '/etc/passwd'`` is a file scan, refused).
2. **Nothing it does persists, and it cannot touch a file.** The query runs on a fresh in-memory connection
   that holds only the views, closed afterwards: no pooled connection ever runs user SQL, so nothing a query
   could change is seen by another. The views read the store's segments as Arrow datasets registered by this
   process (the same good, unreplaced files the views list), so the connection itself needs no file access
   at all: ``enable_external_access`` is off with no allowed directory — a ``COPY … TO`` or ``read_parquet``
   that got past barrier 1 would still be refused by DuckDB. Spilling is off (no temp directory at all),
   Python replacement scans, extension auto-install/-load are off, and the configuration is locked.

The query runs in a worker process with a hard memory cap, killed past its deadline, at most two at a time
(``sqlproc``: DuckDB's own memory limit does not count list and string builders); there a timer interrupts it after
``timeout_s``, and results are streamed as Arrow batches and cut at ``max_rows`` rows and ``max_bytes`` bytes (Arrow
buffer size), so a 100 MB cell cannot come back. Settings that hold server paths (``current_setting``,
``pg_settings``) are refused, and so is a query nested deeper than ``MAX_DEPTH`` parentheses (before it is parsed).
"""

from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from . import mirror
from .limits import Limits, ReadOnlyQueryError
from .migrations import TABLES
from .mirror import install_lock
from .segments import raced, schema_file, table_files

if TYPE_CHECKING:
    import pyarrow.dataset as pads


# Table functions that only generate values from their arguments: no file, no catalog, no other SQL.
SAFE_TABLE_FUNCTIONS = frozenset({"range", "generate_series", "unnest", "repeat", "json_each", "json_tree"})
# Scalar functions that write, execute SQL, change the connection's state or read the environment.
UNSAFE_FUNCTIONS = frozenset({
    "json_execute_serialized_sql", "copy_database", "write_log", "nextval", "setval", "currval", "setseed",
    "force_checkpoint", "enable_checkpoint_on_shutdown", "disable_checkpoint_on_shutdown", "enable_profile",
    "disable_profile", "getenv", "query", "query_table", "sleep_ms", "pg_sleep",
    # the settings hold the server's paths (home, secret, extension and temp directories)
    "current_setting", "which_secret",
})
HIDDEN_TABLES = frozenset({"pg_settings"})  # pg_catalog's view of every setting: server paths
SAFE_SCHEMAS = frozenset({"", "main", "information_schema", "pg_catalog"})
SHOW_SPECIAL = frozenset({"", '"tables"', '"databases"', "__show_tables_expanded"})  # SHOW TABLES, DESCRIBE (…)
SAFE_CATALOGS = frozenset({"", "memory", "system", "temp"})
PLAIN_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
KEYWORDS = re.compile(r"^\s*([A-Za-z]+(?:\s+[A-Za-z]+)?)")


def _walk(tree: Any, found: list[tuple[str, str, str]]) -> None:
    """Collect (kind, schema, name) of every table reference and function call in a serialised tree (iteratively:
    a tree as deep as DuckDB parses never reaches Python's recursion limit)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            kind = node.get("type")
            if kind == "TABLE_FUNCTION":
                fn = node.get("function") or {}
                found.append(("table_function", fn.get("schema", ""), fn.get("function_name", "")))
            elif kind == "BASE_TABLE":
                catalog = (node.get("catalog_name") or "").lower()
                schema = node.get("schema_name", "") if catalog in SAFE_CATALOGS else "<catalog>"
                found.append(("table", schema, node.get("table_name", "")))
            elif kind == "SHOW_REF" and node.get("table_name") not in SHOW_SPECIAL:  # SHOW 'file.csv' scans a file
                found.append(("table", node.get("schema_name", ""), node.get("table_name", "")))
            elif node.get("class") == "FUNCTION":
                found.append(("function", node.get("schema", ""), node.get("function_name", "")))
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


MAX_DEPTH = 200  # nesting levels of parentheses a query may have (a person's query has a handful)


def _depth(sql: str) -> int:
    """The deepest nesting of parentheses outside string literals and quoted names."""
    depth = deepest = 0
    quote = ""
    for ch in sql:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif ch == ")":
            depth -= 1
    return deepest


def check_select_only(sql: str) -> str:
    """The one statement of ``sql`` once it is known to be a plain SELECT over tables and safe functions;
    raises ReadOnlyQueryError (what is refused and why) or ValueError (empty or malformed SQL, or more than one
    statement: only one result is shown, so ``SELECT 1; SELECT 2`` would show the last and hide the first). DuckDB
    splits the statements: a trailing ``;`` or one in a string literal or a comment is no second statement."""
    if _depth(sql) > MAX_DEPTH:  # before DuckDB parses it: its parser and the tree check both recurse
        raise ReadOnlyQueryError(f"refused: the query nests more than {MAX_DEPTH} levels of parentheses")
    try:
        statements = [s.query for s in _parser().extract_statements(sql)]
    except duckdb.Error as e:
        raise ValueError(f"malformed SQL: {str(e).splitlines()[0]}") from e
    if not statements:
        raise ValueError("empty SQL query")
    for st in statements:
        try:
            tree = _tree(st)
        except RecursionError:  # a parse tree deeper than json can read, whatever made it
            raise ReadOnlyQueryError("refused: the query nests too deeply") from None
        if tree.get("error"):
            head = KEYWORDS.match(st)
            raise ReadOnlyQueryError(f"refused: the store is read-only here; only plain SELECT queries run "
                                     f"(got {head.group(1).upper() if head else 'another statement'})")
        found: list[tuple[str, str, str]] = []
        _walk(tree, found)
        for kind, schema, name in found:
            _check_reference(kind, (schema or "").lower(), name)
    if len(statements) > 1:  # after every statement is checked: a write among them is refused as one
        raise ValueError(f"one statement per query: got {len(statements)} (run them one at a time)")
    return statements[0]


def _check_reference(kind: str, schema: str, name: str) -> None:
    low = name.lower()
    if kind == "table_function" and low not in SAFE_TABLE_FUNCTIONS:
        raise ReadOnlyQueryError(f"refused: table function {name}() is not allowed in read-only SQL "
                                 f"(query the views; allowed: {', '.join(sorted(SAFE_TABLE_FUNCTIONS))})")
    if kind == "function" and (low in UNSAFE_FUNCTIONS or low.startswith("__internal")):
        raise ReadOnlyQueryError(f"refused: function {name}() is not allowed in read-only SQL")
    if kind == "table" and low in HIDDEN_TABLES:
        raise ReadOnlyQueryError(f"refused: {name} is not readable here (settings hold the server's paths)")
    if kind == "table" and (schema not in SAFE_SCHEMAS or not PLAIN_NAME.match(name)):
        raise ReadOnlyQueryError(f"refused: {name!r} is not a view name; read-only SQL reads the store's views, "
                                 "not files or other databases")


def _lock_down(con: duckdb.DuckDBPyConnection, limits: Limits) -> None:
    """Settings of the throwaway connection, applied after its views exist and then locked: no file access at
    all (the views read Arrow datasets this process registered, not files)."""
    for stmt in ("SET temp_directory = ''", f"SET memory_limit = '{limits.memory}'", "SET threads = 2", "SET enable_progress_bar = false",
                 "SET python_enable_replacements = false", "SET autoinstall_known_extensions = false",
                 "SET autoload_known_extensions = false", "SET allow_community_extensions = false",
                 "SET enable_external_access = false", "SET lock_configuration = true"):
        con.execute(stmt)


_local = threading.local()  # each thread's parse database: (pid, connection); a new one costs ~30 ms
_inherited: list = []


def _parser() -> duckdb.DuckDBPyConnection:
    """This thread's connection that parses user SQL (``extract_statements``, ``json_serialize_sql`` with the text
    bound as a parameter: nothing is executed, and nothing of it outlives the call). A forked child makes its own
    and keeps the parent's unclosed (closing a database in a forked child can crash it)."""
    held = getattr(_local, "db", None)
    if held is None or held[0] != os.getpid():
        if held is not None:
            _inherited.append(held)
        held = _local.db = (os.getpid(), duckdb.connect(":memory:"))
    return held[1]


def warm_up() -> None:
    """What a process's first query pays once, paid ahead (the SQL worker calls it before it waits for a query):
    this thread's parse database with one parse, and DuckDB's first connection (a throwaway one)."""
    _tree("SELECT 1")
    duckdb.connect(":memory:").close()


def _tree(statement: str) -> dict:
    return json.loads(_parser().execute("SELECT json_serialize_sql(?)", [statement]).fetchone()[0])


def read_tables(root: Path, statement: str) -> list[str]:
    """The tables a checked statement may read: those of the views its parse tree names (a CTE of a view's name
    counts too: more, never fewer; ``runs`` reads ``run_ranks``) and all when it reads the catalogue
    (``information_schema``, ``pg_catalog``). The worker lists and scans only those (``SELECT 1`` lists none; the
    others' views read the empty schema table) and an object store's mirror fetches no other table (``lazy``)."""
    from .views import VIEW_ORDER, view_closure, view_tables

    found: list[tuple[str, str, str]] = []
    _walk(_tree(statement), found)
    tables = [(schema.lower(), name.lower()) for kind, schema, name in found if kind == "table"]
    if any(schema not in ("", "main") for schema, _ in tables):
        return list(TABLES)
    return view_tables(view_closure({name for _, name in tables if name in VIEW_ORDER}))


def one_run(statement: str) -> str | None:
    """The run a checked statement reads alone, or None: a plain SELECT with no CTE, set operation, join or
    subquery over one view whose WHERE is ``run = '<name>'`` (AND any other conditions). Each view's rows of a run
    come from that run's folder alone and depend on no other run's rows (they partition and group by run), so
    reading only that folder gives the same rows (``tests/store/test_sql_reads.py``)."""
    from .views import VIEW_ORDER
    from .writer import valid_run_name

    tree = _tree(statement)
    found: list[tuple[str, str, str]] = []
    _walk(tree, found)
    statements = tree.get("statements") or []
    if len(statements) != 1 or len(found) != sum(kind == "function" for kind, _, _ in found) + 1:
        return None  # one table reference, no table function
    node = statements[0].get("node") or {}
    table = node.get("from_table") or {}
    if (node.get("type") != "SELECT_NODE" or (node.get("cte_map") or {}).get("map") or node.get("sample")
            or table.get("type") != "BASE_TABLE" or table.get("table_name", "").lower() not in VIEW_ORDER
            or (table.get("schema_name") or "").lower() not in ("", "main") or table.get("catalog_name")):
        return None
    names = {((table.get("alias") or table["table_name"]).lower(), "run"), ("run",)}
    where, runs = [node.get("where_clause")], set()
    while where:
        cond = where.pop()
        if not isinstance(cond, dict):
            continue
        if cond.get("type") == "CONJUNCTION_AND":
            where.extend(cond.get("children") or [])
        elif cond.get("type") == "COMPARE_EQUAL":
            sides = [cond.get("left") or {}, cond.get("right") or {}]
            cols = [tuple(c.lower() for c in x.get("column_names", [])) for x in sides if x.get("class") == "COLUMN_REF"]
            texts = [x["literal"].get("text") for x in sides if x.get("type") == "VALUE_CONSTANT"
                     and (x.get("literal") or {}).get("kind") == "STRING"]
            if len(cols) == 1 and cols[0] in names and len(texts) == 1:
                runs.add(texts[0])
    run = next(iter(runs)) if len(runs) == 1 else None
    return run if run is not None and valid_run_name(run) else None


def _sources(root: Path, tables: list[str], run: str | None) -> dict[str, pa.Table | pads.Dataset]:
    """Each of ``tables``' good, unreplaced segments (``segments.table_files``; of ``run`` alone when given) as one
    Arrow dataset at the current schema (a column an older segment lacks reads as NULL, as ``union_by_name`` does);
    every other table as an empty table of its schema (no dataset: a query that reads no table imports no
    ``pyarrow.dataset``)."""
    out: dict[str, pa.Table | pads.Dataset] = {}
    mirror.need(root, tables, run)  # before the shared lock: a mirror fetches what it lacks (lazy.py)
    with install_lock(root, exclusive=False):  # a mirror: one sync's whole state (mirror.py)
        listed = {table: [p for p, _ in table_files(root, table, run)[0]] for table in TABLES if table in tables}
    for table in TABLES:
        empty = schema_file(root, table)
        schema = pq.read_schema(empty)
        if table not in listed:
            out[table] = schema.empty_table()
            continue
        import pyarrow.dataset as pads  # (a tenth of a second of imports, paid only by a query that reads a table)

        out[table] = pads.dataset(listed[table] or [str(empty)], format="parquet", schema=schema)
    return out


def run_checked(root: Path, statement: str, limits: Limits, timeout_s: float) -> tuple[pa.Table, bool]:
    """One try of a checked statement on a locked throwaway connection over the store's views, interrupted after
    ``timeout_s``; FileNotFoundError when a segment vanished under it (list again)."""
    from .views import VIEW_ORDER, view_sql

    con = duckdb.connect(":memory:")
    timer = threading.Timer(timeout_s, con.interrupt)
    try:
        names = {}
        for table, dataset in _sources(root, read_tables(root, statement), one_run(statement)).items():
            names[table] = f"_segments_{table}"
            con.register(names[table], dataset)
        sql = view_sql(root, sources=names)
        for name in VIEW_ORDER:
            con.execute(f"CREATE VIEW {name} AS {sql[name]}")
        _lock_down(con, limits)
        timer.start()
        return _fetch(con, statement, limits)
    except duckdb.InterruptException as e:
        raise ValueError(f"query interrupted: it ran longer than the {limits.timeout_s:g} s limit") from e
    except duckdb.Error as e:
        if raced(e):
            raise FileNotFoundError(str(e)) from e  # a segment merged or replaced mid-query: the caller lists again
        if timer.finished.is_set():
            raise ValueError(f"query interrupted: it ran longer than the {limits.timeout_s:g} s limit") from e
        raise ValueError(f"query failed: {str(e).splitlines()[0]}") from e
    finally:
        timer.cancel()
        con.close()


def _fetch(con: duckdb.DuckDBPyConnection, statement: str, limits: Limits) -> tuple[pa.Table, bool]:
    reader = con.sql(statement).to_arrow_reader(1024)
    batches: list[pa.RecordBatch] = []
    rows = size = 0
    cut = False
    for batch in reader:
        if rows + batch.num_rows > limits.max_rows:
            batch, cut = batch.slice(0, limits.max_rows - rows), True
        if size + batch.nbytes > limits.max_bytes:
            batch, cut = _fit(batch, limits.max_bytes - size), True
            if batch.num_rows == 0 and rows == 0:
                raise ValueError(f"query failed: its first row is larger than the {limits.max_bytes:,}-byte "
                                 "result limit")
        batches.append(batch)
        rows, size = rows + batch.num_rows, size + batch.nbytes
        if cut:
            break
    return pa.Table.from_batches(batches, schema=reader.schema), cut


def _fit(batch: pa.RecordBatch, budget: int) -> pa.RecordBatch:
    """The longest head of ``batch`` whose Arrow size stays within ``budget`` bytes (bisection)."""
    lo, hi = 0, batch.num_rows
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if batch.slice(0, mid).nbytes <= budget:
            lo = mid
        else:
            hi = mid - 1
    return batch.slice(0, lo)
