"""Nussinov folding (seeds 000 and 001). Calling the package folds: ``jaxrna.fold("GGGAAAUCCC")``.

Modules: ``fill`` (diagonal sweep), ``blocked`` (Li et al.'s tiles), ``traceback``,
``reference`` (plain Python oracle), ``api`` (:func:`fold`, :func:`fold_records`).

>>> import jaxrna
>>> jaxrna.fold("GGGAAAUCCC").structure
'(((...))).'
"""

from jaxrna._callable import lazy_callable_package

__all__ = ["FoldResult", "fold", "fold_records"]
lazy_callable_package(__name__, {"FoldResult": "jaxrna.fold.api", "fold": "jaxrna.fold.api",
                                 "fold_records": "jaxrna.fold.api"},
                      'fold')
