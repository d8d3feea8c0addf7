"""A table's columns as the row builders (rows.py) and the tables that show them agree
on: apart from the widget, so that building rows needs no Textual."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    width: int  # 0: takes what is left
    right: bool = False
    priority: int = 0  # higher goes first when space runs out
    help: str = ""  # what `?` says of it
