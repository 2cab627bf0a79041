"""The neighbouring relation between datasets: the one vocabulary type every layer shares.

Like dp_accounting's ``NeighboringRelation`` (``privacy_accountant.py``), it names which pairs of
datasets a guarantee compares:

* ``"replace"`` (replace-one): both datasets have n examples and differ in one of them;
* ``"add-remove"``: one dataset is the other with one example added.

:class:`lastiterate.run.Run`, the PLD engine (:mod:`lastiterate.notions.pld`) and the bounds all
import :data:`Adjacency` from here.
"""

from __future__ import annotations

from typing import Literal, get_args

__all__ = ["ADJACENCIES", "Adjacency"]

Adjacency = Literal["replace", "add-remove"]
"""The neighbouring relation: ``"replace"`` (replace-one) or ``"add-remove"``."""

ADJACENCIES: tuple[Adjacency, ...] = get_args(Adjacency)
"""The values of :data:`Adjacency`, in the order the CLI offers them."""
