"""The SPEC shoe driver whose line drops as its count is asked and is back as soon as the
count's reply has taken the link's state (the reply says "down"): a card's event is delivered
during the call, and by the time the driver process sends that event the line is up again.
The table must end with the link as it is now (up), not as the reply said it was
(``tests/test_drivers_apart_faults.py``). A test plugin: it may use ``devices.plugins``' SPEC
driver, which a vendor's package would not.

Which reading of the link's state is the reply's is told by the thread: the call runs on the
thread that then reads the reply's state (where the process reads it as the call returns);
every other reader (the events' sender, the link's watch) waits until the process has queued
the reply behind the event (two more on its queue than before the event: ``unfinished_tasks``,
which every put counts), then finds the line back. No reader waits on a timer."""

from __future__ import annotations

import itertools
import threading
from typing import Any

from devices.contract import LinkState, OpenRequest

from ._spec_shoe import WrappedSpecShoe, ace_drawn


class DroppingLink:
    def __init__(self, inner: Any, events: Any) -> None:
        self.inner, self.events = inner, events
        self.call_thread: int | None = None  # set while the line is down (during and after a count)
        self.mark = 0  # the queue's puts before the count's event

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    @property
    def state(self) -> LinkState:
        if self.call_thread is None:
            return self.inner.state
        if threading.get_ident() == self.call_thread:  # the reply's reading as the call returns: down
            return LinkState.DOWN
        with self.events.not_empty:  # every put notifies it
            self.events.not_empty.wait_for(lambda: self.events.unfinished_tasks >= self.mark + 2, timeout=30)
        self.call_thread = None  # the reply is queued: the line is back
        return self.inner.state


class DropsAtCount:
    def __init__(self, inner: Any, request: OpenRequest) -> None:
        self.inner, self.request = inner, request
        self.link = DroppingLink(inner.link, request.events)
        self.seqs = itertools.count(1000)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def status(self) -> Any:
        reply = self.inner.status()
        self.link.mark = self.request.events.unfinished_tasks
        self.link.call_thread = threading.get_ident()
        seq = next(self.seqs)
        self.request.events.put(ace_drawn(self.request, seq))
        return reply


PLUGIN = WrappedSpecShoe("dropping-spec", DropsAtCount)
