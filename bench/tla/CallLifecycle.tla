---------------------------- MODULE CallLifecycle ----------------------------
(***************************************************************************)
(* The lifecycle of streamed tool calls, hand-written from the lifecycle   *)
(* table (model/lifecycle.py) and the system rules (model/system.py), with *)
(* every control of the abstract model on (cancel, disconnect, response    *)
(* end, quarantine, tool disabled or changed, tenant stop, restart,        *)
(* confirmation, replay, conflict, limits, malformed data, permission).    *)
(*                                                                         *)
(* It is the TLC baseline of bench/exploration.py: the same state space as *)
(* callsafe's explorer (the same distinct and generated state counts,      *)
(* checked by tests/test_bench_tla_spec.py), written the way a TLA+ user   *)
(* would write it rather than exported from callsafe's rules. Only the     *)
(* moves of the table appear: an ignored or rejected event leaves a call   *)
(* as it is. A call in a terminal state keeps only its history (the        *)
(* explorer's canonical form), so that equivalent states are one state.    *)
(***************************************************************************)
EXTENDS Naturals, Sequences, TLC

CONSTANTS
    TurnCalls,    \* <<calls of turn 1, calls of turn 2, ...>>: disjoint sets of model values
    Fragments,    \* argument fragments per call
    MaxRestarts   \* process restarts

Turns == 1 .. Len(TurnCalls)
Calls == UNION {TurnCalls[t] : t \in Turns}
TurnOf == [c \in Calls |-> CHOOSE t \in Turns : c \in TurnCalls[t]]

\* Lifecycle states (the table's seven).
Active == {"collecting", "candidate", "validated"}     \* opened, not over
Terminal == {"dispatched", "cancelled", "failed"}

VARIABLES
    call,       \* call -> its record (below)
    turn,       \* turn -> "unstarted" | "live" | "cancelled" | "superseded" | "stopped"
    ended,      \* turn -> its response ended or disconnected
    quar,       \* turn -> its response was quarantined
    disabled,   \* the tool was disabled
    changed,    \* the tool was renamed, removed or changed
    restarts    \* restarts so far

vars == <<call, turn, ended, quar, disabled, changed, restarts>>

(* A call: st its lifecycle state; fr fragments received while collecting;  *)
(* ts its terminal event seen; pa parsed; cr confirmation requested; cf     *)
(* confirmed; va validations and ex executions (capped at 2); ws ever       *)
(* cancelled or failed; bd what was wrong at a dispatch ("" if nothing).    *)
NewCall == [st |-> "absent", fr |-> 0, ts |-> FALSE, pa |-> FALSE, cr |-> FALSE,
            cf |-> FALSE, va |-> 0, ex |-> 0, ws |-> FALSE, bd |-> ""]

Init ==
    /\ call = [c \in Calls |-> NewCall]
    /\ turn = [t \in Turns |-> "unstarted"]
    /\ ended = [t \in Turns |-> FALSE]
    /\ quar = [t \in Turns |-> FALSE]
    /\ disabled = FALSE
    /\ changed = FALSE
    /\ restarts = 0

Inc(n) == IF n < 2 THEN n + 1 ELSE 2

\* A terminal call keeps its state and history; the rest only enabled self-loops.
Reduce(k) ==
    IF k.st \in Terminal
    THEN [k EXCEPT !.fr = IF @ < 1 THEN @ ELSE 1, !.pa = FALSE, !.cr = FALSE, !.cf = FALSE]
    ELSE k

Fail(k) == Reduce([k EXCEPT !.st = "failed", !.ws = TRUE])
Drop(k) == Reduce([k EXCEPT !.st = "cancelled", !.ws = TRUE])

\* What a stop (cancel, supersede, quarantine, tool disabled or changed, tenant stop:
\* cancelled; disconnect, restart: failed) does to a call: it ends an active call.
StopTo(k, target) == IF k.st \in Active THEN Reduce([k EXCEPT !.st = target, !.ws = TRUE]) ELSE k

\* The next state from new values: a turn whose calls are all over forgets its response
\* flags; when every call is over, so do the tool flags and the restart count.
Step(nc, nt, ne, nq, nd, nch, nr) ==
    LET done == [t \in Turns |-> \A c \in TurnCalls[t] : nc[c].st \in Terminal]
        all == \A t \in Turns : done[t]
    IN  /\ call' = nc
        /\ turn' = nt
        /\ ended' = [t \in Turns |-> ne[t] /\ ~done[t]]
        /\ quar' = [t \in Turns |-> nq[t] /\ ~done[t]]
        /\ disabled' = (nd /\ ~all)
        /\ changed' = (nch /\ ~all)
        /\ restarts' = IF all THEN MaxRestarts ELSE nr

\* One call changes.
CallStep(x, k) == Step([call EXCEPT ![x] = k], turn, ended, quar, disabled, changed, restarts)

\* Every call (of a set) receives a stop.
StopAll(S, target) == [c \in Calls |-> IF c \in S THEN StopTo(call[c], target) ELSE call[c]]

Started(x) == turn[TurnOf[x]] # "unstarted"
Live(x) == turn[TurnOf[x]] = "live"

-----------------------------------------------------------------------------
(* Inputs addressed to a turn or its response. *)

StartTurn(t) ==   \* turns start in order; a new turn supersedes the older ones
    /\ turn[t] = "unstarted"
    /\ \A u \in 1 .. (t - 1) : turn[u] # "unstarted"
    /\ Step(StopAll({c \in Calls : TurnOf[c] < t}, "cancelled"),
            [u \in Turns |-> IF u = t THEN "live" ELSE IF turn[u] = "live" THEN "superseded" ELSE turn[u]],
            ended, quar, disabled, changed, restarts)

CancelTurn(t) ==
    /\ turn[t] = "live"
    /\ Step(StopAll(TurnCalls[t], "cancelled"), [turn EXCEPT ![t] = "cancelled"],
            ended, quar, disabled, changed, restarts)

Disconnect(t) ==
    /\ turn[t] # "unstarted" /\ ~ended[t]
    /\ Step(StopAll(TurnCalls[t], "failed"), turn, [ended EXCEPT ![t] = TRUE],
            quar, disabled, changed, restarts)

ResponseEnd(t) ==   \* a call still collecting never gets its terminal event
    /\ turn[t] # "unstarted" /\ ~ended[t]
    /\ Step([c \in Calls |-> IF c \in TurnCalls[t] /\ call[c].st = "collecting" THEN Fail(call[c]) ELSE call[c]],
            turn, [ended EXCEPT ![t] = TRUE], quar, disabled, changed, restarts)

Quarantine(t) ==
    /\ turn[t] # "unstarted" /\ ~quar[t]
    /\ Step(StopAll(TurnCalls[t], "cancelled"), turn, ended, [quar EXCEPT ![t] = TRUE],
            disabled, changed, restarts)

-----------------------------------------------------------------------------
(* Inputs addressed to one call (replays on: any of them may come again). *)

Open(x) ==   \* opens only in a live turn, on a response not ended nor quarantined
    /\ Started(x)
    /\ LET k == call[x]
           ok == Live(x) /\ ~ended[TurnOf[x]] /\ ~quar[TurnOf[x]]
       IN  IF k.st = "absent"
           THEN CallStep(x, IF ok THEN [k EXCEPT !.st = "collecting"] ELSE Drop(k))
           ELSE UNCHANGED vars

Fragment(x) ==   \* a new position; after the terminal event, late data
    LET k == call[x] IN
    /\ Started(x)
    /\ ~(k.fr >= Fragments /\ k.st \in {"absent", "collecting"})
    /\ CASE k.st = "collecting" -> CallStep(x, [k EXCEPT !.fr = @ + 1])
         [] k.st \in {"absent", "candidate", "validated"} -> CallStep(x, Fail(k))
         [] OTHER -> UNCHANGED vars

FragmentRepeat(x) ==   \* same position, same bytes: a delivery condition
    /\ Started(x) /\ call[x].fr > 0
    /\ UNCHANGED vars

FragmentConflict(x) ==   \* same position, different bytes
    /\ Started(x) /\ call[x].fr > 0
    /\ IF call[x].st \in Active THEN CallStep(x, Fail(call[x])) ELSE UNCHANGED vars

OverLimit(x) ==   \* a fragment that breaks the byte cap
    /\ Started(x)
    /\ IF call[x].st \in Active \cup {"absent"} THEN CallStep(x, Fail(call[x])) ELSE UNCHANGED vars

TerminalCompleted(x) ==   \* own terminal event, stop reason completed
    LET k == call[x] IN
    /\ Started(x)
    /\ CallStep(x, CASE k.st = "collecting" -> [k EXCEPT !.st = "candidate", !.ts = TRUE]
                     [] k.st = "absent" -> [Fail(k) EXCEPT !.ts = TRUE]
                     [] OTHER -> [k EXCEPT !.ts = TRUE])

TerminalStopped(x) ==   \* own terminal event, any other stop reason
    LET k == call[x] IN
    /\ Started(x)
    /\ CallStep(x, IF k.st \in Active \cup {"absent"} THEN [Fail(k) EXCEPT !.ts = TRUE]
                   ELSE [k EXCEPT !.ts = TRUE])

TerminalRepeat(x) ==   \* a terminal event id already recorded
    /\ Started(x) /\ call[x].ts
    /\ UNCHANGED vars

Confirm(x) ==
    /\ Started(x)
    /\ IF call[x].st = "validated" THEN CallStep(x, [call[x] EXCEPT !.cf = TRUE]) ELSE UNCHANGED vars

Deny(x) ==
    /\ Started(x)
    /\ IF call[x].st \in Active THEN CallStep(x, Drop(call[x])) ELSE UNCHANGED vars

-----------------------------------------------------------------------------
(* Internal steps: parse once, validate once, dispatch after the re-check. *)

ParseOk(x) ==   \* only a complete buffer parses
    LET k == call[x] IN
    /\ Started(x) /\ k.st = "candidate" /\ ~k.pa /\ k.fr = Fragments
    /\ CallStep(x, [k EXCEPT !.pa = TRUE])

ParseFailed(x) ==   \* a gap, or malformed bytes
    LET k == call[x] IN
    /\ Started(x) /\ k.st = "candidate" /\ ~k.pa
    /\ CallStep(x, Fail(k))

Valid(x) ==   \* against the tool as it stands now
    LET k == call[x] IN
    /\ Started(x) /\ k.st = "candidate" /\ k.pa /\ ~(disabled \/ changed)
    /\ CallStep(x, [k EXCEPT !.st = "validated", !.va = Inc(@)])

Invalid(x) ==
    LET k == call[x] IN
    /\ Started(x) /\ k.st = "candidate" /\ k.pa
    /\ CallStep(x, Fail([k EXCEPT !.va = Inc(@)]))

\* What was wrong at the moment of a dispatch, if anything.
BadDispatch(k, live) ==
    IF k.ws THEN "stopped"
    ELSE IF ~(k.ts /\ k.pa /\ k.va = 1) THEN "unfinished"
    ELSE IF ~live THEN "not current"
    ELSE IF ~k.cf THEN "unconfirmed"
    ELSE ""

MayDispatch(x) ==   \* validated, no confirmation outstanding
    /\ Started(x) /\ call[x].st = "validated" /\ ~(call[x].cr /\ ~call[x].cf)

Dispatch(x) ==   \* the re-check at execution time; the tool needs confirmation
    LET k == call[x]
        t == TurnOf[x]
        ok == turn[t] = "live" /\ ~quar[t] /\ ~(disabled \/ changed)
    IN
    /\ MayDispatch(x)
    /\ CallStep(x, IF ~ok THEN Drop(k)
                   ELSE IF ~k.cf THEN [k EXCEPT !.cr = TRUE]
                   ELSE Reduce([k EXCEPT !.st = "dispatched", !.ex = Inc(@),
                                         !.bd = IF @ = "" THEN BadDispatch(k, turn[t] = "live") ELSE @]))

DispatchDenied(x) ==   \* the actor is refused at the permission boundary
    /\ MayDispatch(x)
    /\ CallStep(x, Drop(call[x]))

-----------------------------------------------------------------------------
(* Inputs addressed to the whole system: one tenant, one tool. *)

DisableTool ==
    /\ ~disabled
    /\ Step(StopAll(Calls, "cancelled"), turn, ended, quar, TRUE, changed, restarts)

CatalogChange ==
    /\ ~changed
    /\ Step(StopAll(Calls, "cancelled"), turn, ended, quar, disabled, TRUE, restarts)

StopTenant ==
    /\ \E t \in Turns : turn[t] = "live"
    /\ Step(StopAll(Calls, "cancelled"), [t \in Turns |-> IF turn[t] = "live" THEN "stopped" ELSE turn[t]],
            ended, quar, disabled, changed, restarts)

Restart ==
    /\ restarts < MaxRestarts
    /\ Step(StopAll(Calls, "failed"), turn, ended, quar, disabled, changed, restarts + 1)

Next ==
    \/ \E t \in Turns : StartTurn(t) \/ CancelTurn(t) \/ Disconnect(t) \/ ResponseEnd(t) \/ Quarantine(t)
    \/ \E x \in Calls :
        \/ Open(x) \/ Fragment(x) \/ FragmentRepeat(x) \/ FragmentConflict(x) \/ OverLimit(x)
        \/ TerminalCompleted(x) \/ TerminalStopped(x) \/ TerminalRepeat(x) \/ Confirm(x) \/ Deny(x)
        \/ ParseOk(x) \/ ParseFailed(x) \/ Valid(x) \/ Invalid(x) \/ Dispatch(x) \/ DispatchDenied(x)
    \/ DisableTool \/ CatalogChange \/ StopTenant \/ Restart

Spec == Init /\ [][Next]_vars

-----------------------------------------------------------------------------
(* The state invariants. *)

Safety ==
    \A c \in Calls :
        LET k == call[c] IN
        /\ k.ex <= 1                                       \* INV-ONCE
        /\ k.va <= 1                                       \* INV-VALIDATE-ONCE
        /\ k.bd = ""                                       \* INV-CANCEL, -TERMINAL, -TURN, -CONFIRM
        /\ ~(k.st \in {"cancelled", "failed"} /\ k.ex > 0)  \* INV-CANCEL
        /\ (k.st = "dispatched") = (k.ex > 0)              \* INV-CANCEL

\* The calls of one turn are interchangeable (those of different turns are not).
Symmetry == {p \in Permutations(Calls) : \A c \in Calls : TurnOf[p[c]] = TurnOf[c]}
=============================================================================
