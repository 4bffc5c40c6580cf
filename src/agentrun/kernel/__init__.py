"""The pure kernel: it folds the log, picks the next move, and makes every event.

``evolve`` folds events into a BuildState and ``decide`` picks the next move
(``budget`` says what the build may still spend). The events to append are made here
too, from the state, the decision and what happened (``draft.Draft``): ``runner``
(attaching, acknowledging, publishing, what needs nothing run), ``sessions`` (agent
work), ``checks`` (verify and finalize commands), ``verbs`` (agent verbs), ``requests``
(people's requests). The runner, the commands and the verbs load the state, call one of
these, and append what it returns (``store.append.append_decided``). No I/O, no clock,
no random ids.

This package imports nothing itself: the verbs' quick path imports ``kernel.rules`` alone,
without the models the other modules load.
"""
