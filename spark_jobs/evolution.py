"""What a spec change may do to an existing aggregate table: pure rules, no Spark.

The table records the *shape* of the spec that created it (window, merge keys, aggregate
definitions, result column types). A new spec may add aggregates (their columns are added to
the table) and may drop some (their columns stay, no longer written). Anything that changes
what an existing row means is refused with one line: another window, other merge keys, an
aggregate redefined under the same name, a column whose type changed.
"""

from __future__ import annotations

import json
from typing import Any

from spark_jobs.errors import JobConfigError

Shape = dict[str, Any]


def added_columns(table: str, old: Shape, new: Shape) -> dict[str, str]:
    """Columns (name → Spark SQL type) to add to ``table`` for ``new``; raises if refused."""
    for removed in [k for k in old["merge_keys"] if k not in new["merge_keys"]]:
        raise JobConfigError(
            f"--table {table}: the spec removes merge key {removed!r} "
            f"(table keys {', '.join(old['merge_keys'])}); rows would collide; use a new --table"
        )
    if old["merge_keys"] != new["merge_keys"]:
        raise JobConfigError(
            f"--table {table}: merge keys {', '.join(new['merge_keys'])} differ from the table's "
            f"{', '.join(old['merge_keys'])}; use a new --table"
        )
    for part in ("window", "python"):
        if old.get(part) != new.get(part):
            raise JobConfigError(
                f"--table {table} was created with {part} {_show(old.get(part))}, this run asks "
                f"for {_show(new.get(part))}; use the same {part} or a new --table"
            )
    for name, definition in new["aggregates"].items():
        before = old["aggregates"].get(name)
        if before is not None and before != definition:
            raise JobConfigError(
                f"--table {table}: aggregate {name!r} was {_show(before)}, now {_show(definition)};"
                " give the new definition a new name"
            )
    added = {}
    for column, kind in new["columns"].items():
        was = old["columns"].get(column)
        if was is None:
            added[column] = kind
        elif was != kind:
            raise JobConfigError(
                f"--table {table}: column {column!r} is {was} in the table, the spec makes it "
                f"{kind}; use a new --table"
            )
    return added


def _show(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))
