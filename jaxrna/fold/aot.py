"""Moved to :mod:`jaxrna.programs` (kept while callers move)."""

from jaxrna.programs import *  # noqa: F401,F403
from jaxrna.programs import _load, _save, forget, memo_size, program, use_disk  # noqa: F401
