"""Turns taken in the order they were handed out: ticket k waits until every ticket before it
is done (or given up), and a thread holding its turn may enter it again.

:func:`jaxrna.programs.prefetch` hands a ticket to each program it queues, so its threads lower
their programs one at a time in the order the programs were asked for.

>>> t = Turns()
>>> first, second = t.ticket(), t.ticket()
>>> t.done(first)                       # first never needed its turn (given up)
>>> with t.turn(second):
...     with t.turn(second):            # the holder again: passes
...         pass
>>> t.waiting()
0
"""

from __future__ import annotations

import threading


class Turns:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._next = 0          # the next ticket handed out
        self._serving = 0       # the first ticket not done
        self._done: set[int] = set()
        self._held = threading.local()      # depth: a holder taking its turn again passes

    def ticket(self) -> int:
        with self._cond:
            self._next += 1
            return self._next - 1

    def waiting(self) -> int:
        """Tickets handed out and not done."""
        with self._cond:
            return self._next - self._serving - len(self._done)

    def done(self, ticket: int) -> None:
        """``ticket`` is finished with (taken or not); later tickets may go."""
        with self._cond:
            if ticket < self._serving or ticket in self._done:
                return
            self._done.add(ticket)
            while self._serving in self._done:
                self._done.discard(self._serving)
                self._serving += 1
            self._cond.notify_all()

    def turn(self, ticket: int) -> "_Turn":
        """A context: waits for every earlier ticket, then holds the turn; done on leaving."""
        return _Turn(self, ticket)


class _Turn:
    def __init__(self, turns: Turns, ticket: int) -> None:
        self.turns, self.ticket = turns, ticket

    def __enter__(self):
        held = self.turns._held
        depth = getattr(held, "depth", 0)
        held.depth = depth + 1
        if depth:
            return self
        with self.turns._cond:
            while self.turns._serving < self.ticket:
                self.turns._cond.wait()
        return self

    def __exit__(self, *exc) -> None:
        held = self.turns._held
        held.depth -= 1
        if not held.depth:
            self.turns.done(self.ticket)
