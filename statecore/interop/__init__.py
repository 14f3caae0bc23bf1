"""Bring pytransitions machines in and out of statecore (the ``interop`` extra).

Teams that already run `transitions <https://github.com/pytransitions/transitions>`_
should not have to rewrite a lifecycle by hand to check it with statecore, and
teams that define it in statecore may still want to run it on transitions. So:

* `to_transitions(machine)` returns keyword arguments for
  ``transitions.Machine(model=TransitionsModel(machine), **kwargs)``. The
  model holds the statecore variables as plain attributes; each guard becomes
  a condition and each effect (and emitter) an ``after`` callback that reads
  those attributes as the snapshot and ``EventData.kwargs`` as the payload.
* `from_transitions(machine_or_config, ...)` turns a ``transitions.Machine``
  or the dict of its keyword arguments into a validated statecore `Machine`.

``transitions`` is imported lazily, inside the functions, so that
``import statecore`` stays standard-library only; without it they raise an
`ImportError` that names ``pip install 'statecore[interop]'``.

What maps one to one:

=====================================  =========================================
statecore                              transitions
=====================================  =========================================
`State` (``final=True``)               state name (``{"name": .., "final": True}``)
initial state                          ``initial``
`Transition` sources                   ``source`` (a name, a list, or ``'*'``)
target ``None`` (stay, no change)      ``dest=None`` (internal) or ``'='``
                                       (reflexive, i.e. exit and re-enter)
guard ``(snapshot, payload) -> bool``  ``conditions`` / ``unless``
effect ``-> {var: value}``             ``after`` callback setting attributes
payload fields                         trigger keyword arguments
=====================================  =========================================

What does not, and why:

* **Policies.** statecore decides per *event* what a missing transition
  means (``reject``, ``ignore`` or ``error``); transitions decides per machine
  or per *state* (``ignore_invalid_triggers``), and only when the state has
  no transition at all for the trigger: when every condition fails the
  trigger always returns ``False``. `to_transitions` therefore sets
  ``ignore_invalid_triggers=False`` only when every event's policy is
  ``error`` (and even then failing guards return ``False`` instead of
  raising); otherwise ``True``, so ``error`` events fail open in transitions.
  ``reject`` and ``ignore`` both become a ``False`` return. `from_transitions`
  maps ``ignore_invalid_triggers=True`` to ``reject`` and the default (raise)
  to ``error``, unless ``policies=`` says otherwise.
* **Internal vs reflexive.** statecore has no entry or exit actions, so
  ``dest=None`` and ``dest='='`` mean the same thing to it (target ``None``).
  `to_transitions` emits ``dest=None``: there is no state change, so no exit
  or entry callbacks a user might add would run, just as in statecore.
* **Final states.** In transitions ``final=True`` only fires ``on_final``; a
  final state may still have outgoing transitions. In statecore a final state
  has none, so such a definition is refused (`FinalStateTransitionError`).
* **Hot states** have no transitions counterpart: pass ``hot=`` on the way in.
* **Callbacks** (``before``, ``after``, ``on_enter``, ``on_exit`` and the
  machine-level ones) mutate a model; statecore effects are pure functions
  that return the variable updates, so they cannot be derived from code.
  Give them explicitly with ``effects={trigger: fn}``; a transition whose
  trigger has no effect but has callbacks is refused unless
  ``ignore_callbacks=True`` says the callbacks do not touch the variables.
* **Unsupported outright**, because they change what conditions see or what
  a trigger returns: ``prepare`` / ``prepare_event`` callbacks, nested
  (hierarchical) states, asynchronous machines, ``queued=True``, enum states
  and ``ordered_transitions``. Auto transitions (``to_<state>()``) are
  skipped: they leave every state, final ones included.
* **Payload checks and outputs.** transitions accepts any keyword arguments;
  statecore's `step` is what checks them against the event's fields.
  Outputs a statecore transition emits are appended to
  `TransitionsModel.emitted`.

The code lives by direction: `statecore.interop.to_transitions` (statecore ->
transitions), `statecore.interop.from_transitions` with `statecore.interop.config` and
`statecore.interop.callbacks` (transitions -> statecore), and
`statecore.interop.errors`. This module is the public face of all of them.
"""

from __future__ import annotations

from .errors import (
    INSTALL_HINT,
    InteropError,
    UnresolvedCallbackError,
    UnsupportedFeatureError,
)
from .from_transitions import from_transitions
from .to_transitions import TransitionsModel, to_transitions

__all__ = [
    "INSTALL_HINT",
    "InteropError",
    "TransitionsModel",
    "UnresolvedCallbackError",
    "UnsupportedFeatureError",
    "from_transitions",
    "to_transitions",
]
