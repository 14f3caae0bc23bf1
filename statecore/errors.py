"""Exception classes.

Definition errors are raised while a definition is being built - an `Event`,
a `Machine`, a `System`, or a snapshot built by hand with
``Machine.snapshot`` - never while a built machine runs. Their messages name
the culprit (machine, state, event, variable, field or transition) and the
fix. Each kind of mistake has its own class so that tests and tools can tell
them apart.
"""

from __future__ import annotations


class StatecoreError(Exception):
    """Base class of every error raised by statecore."""


class DefinitionError(StatecoreError):
    """A machine or system definition is invalid."""


class InvalidNameError(DefinitionError):
    """A state, event, variable or field name is not a Python identifier."""


class DuplicateNameError(DefinitionError):
    """Two states, events, variables or fields share a name."""


class NameClashError(DefinitionError):
    """A name would be ambiguous, e.g. a state and an event with the same name."""


class InitialStateError(DefinitionError):
    """There is no initial state, or more than one."""


class UnknownStateError(DefinitionError):
    """A transition names a source or target state that is not declared."""


class UnknownEventError(DefinitionError):
    """A transition names an event that is not declared."""


class FinalStateTransitionError(DefinitionError):
    """A transition leaves a final state."""


class HotFinalStateError(DefinitionError):
    """A state is both hot (must not rest there) and final (always rests there)."""


class UnreachableStateError(DefinitionError):
    """A declared state cannot be reached from the initial state."""


class UnusedEventError(DefinitionError):
    """A declared event has no transition at all."""


class NondeterminismError(DefinitionError):
    """Two transitions can both be enabled for the same state, event and payload."""


class VariableDomainError(DefinitionError):
    """A variable's default value lies outside its domain, or the domain is empty."""


class UnknownVariableError(DefinitionError):
    """An effect assigns a variable that the machine does not declare."""


class EffectDomainError(DefinitionError):
    """An effect produces a value outside the assigned variable's domain."""


class FieldDomainError(DefinitionError):
    """A payload field has neither a finite domain nor a sample of values."""


class PolicyError(DefinitionError):
    """An event declares an unknown no-transition policy."""


class CallbackError(DefinitionError):
    """A guard, effect or emitter raised, or returned the wrong type, during validation."""


class SystemDefinitionError(DefinitionError):
    """A system composes machines, keys or actions inconsistently."""


class FireError(StatecoreError):
    """An undeclared event was fired, or with missing or unknown payload fields.

    This is a programmer error and is raised whatever the event's policy.
    """


class TransitionError(StatecoreError):
    """No transition was enabled for an event whose policy is ``error``."""


class ActionError(StatecoreError):
    """A system action was applied where the model does not allow it."""


class ModelError(DefinitionError):
    """A model's action or property misbehaved while being explored.

    The message's first line names the action or property and what went
    wrong; the lines after it show the trace that reached the state. `trace`
    holds that trace and `__cause__` the original exception, if any.
    """

    def __init__(self, message: str, trace: object = None) -> None:
        super().__init__(message)
        self.trace = trace


class ActionRaisedError(ModelError):
    """A system action (or `init`) raised instead of running or disabling itself."""


class PropertyRaisedError(ModelError):
    """A property's predicate, condition or monitor router raised."""


class NondeterministicActionError(ModelError):
    """The same action on the same state gave different successors."""


class CheckLimitError(DefinitionError):
    """A machine's `check_limit` is not a positive number of snapshots."""


class DefinitionTypeError(DefinitionError):
    """A definition part has the wrong type: a state given as a string, a tuple for a transition."""


class ValidationLimitWarning(UserWarning):
    """Validation stopped at `check_limit` with reachable snapshots left unchecked."""


class ImpureCallbackError(StatecoreError):
    """A memoised step differs from `step` run again: a guard, effect or emitter is impure."""


class ReentrantFireError(StatecoreError):
    """A guard, effect or emitter fired on an instance whose step it is part of."""


class ListenerError(StatecoreError):
    """Listeners raised after a committed transition; every listener still ran.

    `outcome` is the committed outcome and `errors` the exceptions, in
    listener order; `__cause__` is the first of them.
    """

    def __init__(self, message: str, outcome: object, errors: tuple[Exception, ...]) -> None:
        super().__init__(message)
        self.outcome = outcome
        self.errors = errors
