"""The signal sent when a batch of a run's events is stored: what reacts to a run's events outside its stream.

:func:`robotlab_django.streaming.event_stream.persist_events` sends :data:`events_stored` once the batch's rows
are written (in the storing thread, on its connection and transaction), with ``result_id`` (the row the events
belong to) and ``events`` (the stored :class:`robotlab.streaming.Event`\\ s). A receiver must be quick and must not
raise: it runs on every batch of every run. A2A push notifications listen to it
(:mod:`robotlab_django.protocols.push`).
"""

from __future__ import annotations

from django.dispatch import Signal

__all__ = ["events_stored"]

#: Sent with ``result_id`` and ``events`` after each stored batch of a run's events.
events_stored = Signal()
