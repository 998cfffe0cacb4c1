"""Tables in and out of an engine: ``Engine.predict_df`` (and ``Engine.cross_validation``).

A table is a pandas or polars DataFrame, or any Arrow table (an object with ``__arrow_c_stream__``: a
``pyarrow.Table``, a DuckDB result, ...). It reaches the engine through the Arrow C stream interface, read by
totoc's Rust code with no conversion in Python (pandas hands its columns over through pyarrow, which pandas 3
uses for this). Results come back the same way, as the caller's kind of table: pandas in → pandas out, polars
in → polars out, any other Arrow table → ``pyarrow.Table`` (or, without pyarrow, an object with
``__arrow_c_stream__`` that any Arrow library reads).
"""

from __future__ import annotations

import logging
import os
import warnings
from typing import Any, Sequence

from . import _native

__all__ = ["predict_df", "cross_validation", "table_kind", "as_kind"]

log = logging.getLogger("totoc")


def table_kind(df: Any) -> str:
    """``"pandas"``, ``"polars"`` or ``"arrow"``: which kind of table the results are returned as."""
    module = type(df).__module__
    if module.startswith("pandas") and hasattr(df, "columns"):
        return "pandas"
    if module.startswith("polars"):
        return "polars"
    return "arrow"


def arrow_source(df: Any) -> Any:
    """What the native reader takes: an object with ``__arrow_c_stream__`` (a polars LazyFrame is collected)."""
    if table_kind(df) == "polars" and hasattr(df, "collect") and not hasattr(df, "__arrow_c_stream__"):
        return df.collect()
    return df


def as_kind(table: Any, kind: str) -> Any:
    """A native ``ArrowTable`` as a table of ``kind``."""
    if kind == "pandas":
        import pandas as pd

        return pd.DataFrame.from_arrow(table)
    if kind == "polars":
        import polars as pl

        return pl.DataFrame(table)
    try:
        import pyarrow as pa
    except ImportError:
        return table
    return pa.table(table)


def _targets(target: str | Sequence[str] | None) -> list[str] | None:
    if target is None:
        return None
    return [target] if isinstance(target, str) else list(target)


def _show(result: Any) -> None:
    """The lines ``totoc forecast`` prints on stderr: the calendar as a log record, the notes as warnings."""
    if result.calendar:
        log.info("%s", result.calendar)
    for note in result.notes:
        warnings.warn(note.removeprefix("note: "), UserWarning, stacklevel=3)


def predict_df(
    native: Any,
    df: Any,
    prediction_length: int,
    quantile_levels: Sequence[float] | None = None,
    id_column: str | None = None,
    timestamp_column: str | None = None,
    target: str | Sequence[str] | None = None,
    *,
    samples: int | None = None,
    seed: int | None = None,
    freq: str | None = None,
    calendar: str = "auto",
    timezone: str | None = None,
    holidays: str | os.PathLike[str] | None = None,
    timestamp_unit: str = "s",
    strict_context: bool = False,
    write_samples: bool = False,
    layout: str | None = None,
    temperature: float | None = None,
    top_k: int | None = None,
    top_p: float | None = None,
    params: dict[str, float] | None = None,
) -> Any:
    """See ``Engine.predict_df``."""
    kind = table_kind(df)
    result = _native.predict_table(
        native,
        arrow_source(df),
        prediction_length,
        quantiles=None if quantile_levels is None else list(quantile_levels),
        samples=samples,
        seed=seed,
        **_reading(id_column, timestamp_column, target, timestamp_unit, freq, calendar, timezone, holidays),
        strict_context=strict_context,
        write_samples=write_samples,
        layout=layout,
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        params=params,
    )
    _show(result)
    return as_kind(result.table, kind)


def _time_columns_as_input(out: Any, df: Any, kind: str, time_column: str | None, names: Sequence[str]) -> Any:
    """``out``'s timestamp columns (``names``, ISO 8601 text or epoch numbers as ``totoc backtest`` writes them)
    converted back to the type of ``df``'s timestamp column, each library parsing its own."""
    if time_column is None:
        return out
    try:
        if kind == "pandas":
            import pandas as pd

            dtype = df[time_column].dtype
            for c in names:
                if dtype.kind == "M":
                    tz = getattr(dtype, "tz", None)
                    parsed = pd.to_datetime(out[c], format="ISO8601", utc=tz is not None)
                    out[c] = parsed.dt.tz_convert(tz) if tz is not None else parsed.astype(dtype)
                elif dtype.kind in "iu":
                    out[c] = out[c].astype(dtype)
            return out
        if kind == "polars":
            import polars as pl

            dtype = df.collect_schema()[time_column] if hasattr(df, "collect_schema") else df.schema[time_column]
            if isinstance(dtype, pl.Datetime):
                exprs = [pl.col(c).str.to_datetime(time_unit=dtype.time_unit, time_zone=dtype.time_zone) for c in names]
            elif dtype == pl.Date:
                exprs = [pl.col(c).str.to_date() for c in names]
            elif dtype.is_integer():
                exprs = [pl.col(c).cast(dtype) for c in names]
            else:
                return out
            return out.with_columns(exprs)
        import pyarrow as pa
        import pyarrow.compute as pc

        if not isinstance(out, pa.Table) or not isinstance(df, pa.Table):
            return out
        typ = df.schema.field(time_column).type
        if pa.types.is_timestamp(typ) or pa.types.is_date(typ) or pa.types.is_integer(typ):
            for c in names:
                i = out.column_names.index(c)
                out = out.set_column(i, c, pc.cast(out[c], typ))
        return out
    except Exception:  # noqa: BLE001 - the text columns are still right; the conversion is a convenience
        log.warning("totoc: the %s columns are left as text (could not convert them to the input's type)", names)
        return out


def _reading(
    id_column: str | None,
    timestamp_column: str | None,
    target: str | Sequence[str] | None,
    timestamp_unit: str,
    freq: str | None,
    calendar: str,
    timezone: str | None,
    holidays: str | os.PathLike[str] | None,
) -> dict[str, Any]:
    """How a table is read into series (`predict_df` and `cross_validation` alike): the native calls' keywords."""
    return {
        "id_column": id_column,
        "timestamp_column": timestamp_column,
        "target": _targets(target),
        "timestamp_unit": timestamp_unit,
        "freq": freq,
        "calendar": calendar,
        "timezone": timezone,
        "holidays": None if holidays is None else os.fspath(holidays),
    }


def cross_validation(
    native: Any,
    df: Any,
    h: int,
    n_windows: int,
    step_size: int | None = None,
    *,
    id_column: str | None = None,
    timestamp_column: str | None = None,
    target: str | Sequence[str] | None = None,
    model: str = "totoc",
    context: int | None = None,
    samples: int = 0,
    quantile_levels: Sequence[float] | None = None,
    seed: int = 0,
    chunk: int = 512,
    freq: str | None = None,
    calendar: str = "auto",
    timezone: str | None = None,
    holidays: str | os.PathLike[str] | None = None,
    timestamp_unit: str = "s",
    layout: str | None = None,
    temperature: float | None = None,
    top_k: int | None = None,
    top_p: float | None = None,
    params: dict[str, float] | None = None,
) -> Any:
    """See ``Engine.cross_validation``."""
    kind = table_kind(df)
    source = arrow_source(df)
    table = _native.cross_validation(
        native,
        source,
        h,
        n_windows,
        step_size=step_size,
        context=context,
        samples=samples,
        quantiles=None if quantile_levels is None else list(quantile_levels),
        seed=seed,
        chunk=chunk,
        model=model,
        layout=layout,
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        params=params,
        **_reading(id_column, timestamp_column, target, timestamp_unit, freq, calendar, timezone, holidays),
    )
    names = table.column_names
    out = as_kind(table, kind)
    # The timestamp column is the one before `cutoff` (after the id column, when the table has one).
    time_name = names[names.index("cutoff") - 1]
    # Without timestamp_column, the column recognised by its name (the output keeps the input's name), if any.
    time_column = timestamp_column if timestamp_column is not None else time_name
    if time_column not in _column_names(source):
        return out
    return _time_columns_as_input(out, source, kind, time_column, [time_name, "cutoff"])


def _column_names(df: Any) -> list[str]:
    """The column names of a pandas, polars or Arrow table."""
    if hasattr(df, "collect_schema"):
        return list(df.collect_schema().names())
    if hasattr(df, "column_names"):
        return list(df.column_names)
    if hasattr(df, "columns"):
        return [str(c) for c in df.columns]
    return []
