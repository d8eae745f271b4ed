"""Nussinov folding (seeds 000 and 001). Calling the package folds: ``jaxrna.fold("GGGAAAUCCC")``.

Modules: ``fill`` (diagonal sweep), ``blocked`` (Li et al.'s tiles), ``traceback``,
``reference`` (plain Python oracle), ``api`` (:func:`fold`, :func:`fold_records`).

>>> import jaxrna
>>> jaxrna.fold("GGGAAAUCCC").structure
'(((...))).'
"""

from jaxrna._callable import make_callable
from jaxrna.fold.api import FoldResult, fold, fold_records

__all__ = ["FoldResult", "fold", "fold_records"]
make_callable(__name__, fold)
