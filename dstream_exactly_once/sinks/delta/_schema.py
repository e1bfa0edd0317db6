"""Schemas of the Delta sink: checking a batch's schema against the table's, and rows to Arrow.

A batch's Arrow schema must match the table's column for column (names, and types up to Arrow's
string/binary/list widths, which Delta does not distinguish); the check runs before anything is
written, and its error names the column, the batch's type and the table's type. Rows become an
Arrow table on the executor before any file is written, and a value that does not fit its
column raises :class:`~dstream_exactly_once.errors.RowRejectedError` naming the column.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Sequence

import pyarrow as pa

from ...errors import ConfigurationError, RowRejectedError

__all__ = ["check_partition_columns", "check_schema", "rows_to_table", "same_type"]

_WIDE = {pa.large_string(): pa.string(), pa.large_binary(): pa.binary()}


def _narrow(t: pa.DataType) -> pa.DataType:
    """``t`` with Arrow's large string/binary/list widths replaced by the plain ones (Delta has one)."""
    if t in _WIDE:
        return _WIDE[t]
    if pa.types.is_large_list(t) or pa.types.is_list(t):
        return pa.list_(_narrow(t.value_type))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _narrow(f.type)) for f in t])
    if pa.types.is_map(t):
        return pa.map_(_narrow(t.key_type), _narrow(t.item_type))
    return t


def same_type(a: pa.DataType, b: pa.DataType) -> bool:
    """Whether a column of type ``a`` can be appended to a Delta column read back as ``b``."""
    a, b = _narrow(a), _narrow(b)
    if pa.types.is_timestamp(a) and pa.types.is_timestamp(b):
        return (a.tz is None) == (b.tz is None)  # Delta stores microseconds; the unit is converted
    return bool(a.equals(b))


def check_schema(given: pa.Schema, table: pa.Schema, where: str) -> None:
    """Refuse a batch schema ``given`` that does not match the table's ``table`` (column names and types).

    ``where`` names the table in the message. Raises :class:`ConfigurationError`."""
    table_fields = {f.name: f for f in table}
    for f in given:
        known = table_fields.get(f.name)
        if known is None:
            raise ConfigurationError(f"{where}: column {f.name!r} ({f.type}) is not in the table; its columns are "
                                     f"{', '.join(f'{n} ({t.type})' for n, t in table_fields.items())}")
        if not same_type(f.type, known.type):
            raise ConfigurationError(f"{where}: column {f.name!r} has type {f.type} but the table's column has type "
                                     f"{known.type}")
    missing = [n for n in table_fields if n not in given.names]
    if missing:
        raise ConfigurationError(f"{where}: the schema lacks the table's column(s) "
                                 f"{', '.join(f'{n} ({table_fields[n].type})' for n in missing)}")


def check_partition_columns(partition_by: Sequence[str], schema: pa.Schema, table_partitions: Optional[List[str]],
                            where: str) -> None:
    """Refuse partition columns not in ``schema``, or different from the table's (``None``: no table yet)."""
    for name in partition_by:
        if name not in schema.names:
            raise ConfigurationError(f"{where}: partition column {name!r} is not a column of the schema "
                                     f"({', '.join(schema.names)})")
    if table_partitions is not None and list(partition_by) != list(table_partitions):
        raise ConfigurationError(f"{where}: partition_by={list(partition_by)!r} but the table is partitioned by "
                                 f"{list(table_partitions)!r}")


def _as_dict(row: Any, names: Sequence[str]) -> Dict[str, Any]:
    if isinstance(row, dict):
        return row
    as_dict = getattr(row, "asDict", None)  # a pyspark Row
    if callable(as_dict):
        return as_dict(recursive=True)  # type: ignore[no-any-return]
    if isinstance(row, (tuple, list)):
        if len(row) != len(names):
            raise RowRejectedError(f"a row of {len(row)} values does not fit the table's {len(names)} columns "
                                   f"({', '.join(names)}): {type(row).__name__} of length {len(row)}")
        return dict(zip(names, row, strict=True))
    raise RowRejectedError(f"a row must be a dict, a tuple or list in column order, or a Row; got "
                           f"{type(row).__name__}")


def rows_to_table(rows: Iterable[Any], schema: pa.Schema, where: str) -> pa.Table:
    """``rows`` (dicts, tuples/lists in column order, or pyspark Rows; or Arrow record batches) as an
    Arrow table of ``schema``. A value that does not fit its column raises :class:`RowRejectedError`
    naming the column, the value's type and the column's type; nothing is written then."""
    names = schema.names
    batches: List[pa.RecordBatch] = []
    dicts: List[Dict[str, Any]] = []
    for row in rows:
        if isinstance(row, pa.RecordBatch):
            batches.append(_cast_batch(row, schema, where))
        else:
            dicts.append(_as_dict(row, names))
    if dicts:
        unknown = sorted({k for d in dicts for k in d} - set(names))
        if unknown:
            raise RowRejectedError(f"{where}: rows have column(s) {unknown} the table does not have "
                                   f"({', '.join(names)})")
        columns = []
        for field in schema:
            values = [d.get(field.name) for d in dicts]
            try:
                columns.append(pa.array(values, type=field.type))
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError) as exc:
                bad = next((v for v in values if v is not None and not _fits(v, field.type)), None)
                raise RowRejectedError(f"{where}: column {field.name!r} got a value of type {type(bad).__name__} "
                                       f"that does not fit the table's type {field.type} ({exc})") from None
        for name, col in zip(names, columns, strict=True):
            if col.null_count and not schema.field(name).nullable:
                raise RowRejectedError(f"{where}: column {name!r} is not nullable but a row has no value for it")
        batches.append(pa.RecordBatch.from_arrays(columns, schema=schema))
    return pa.Table.from_batches(batches, schema=schema)


def _fits(value: Any, t: pa.DataType) -> bool:
    try:
        pa.array([value], type=t)
        return True
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError):
        return False


def _cast_batch(batch: pa.RecordBatch, schema: pa.Schema, where: str) -> pa.RecordBatch:
    check_schema(batch.schema, schema, where)
    batch = batch.select(schema.names)
    if batch.schema.equals(schema):
        return batch
    return pa.RecordBatch.from_arrays([batch.column(i).cast(f.type) for i, f in enumerate(schema)], schema=schema)
