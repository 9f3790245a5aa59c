"""The one dispatcher every front door uses: parse, validate, check the role, submit or answer, reply once.

A transport (:mod:`~table.interfaces.control_socket`, :mod:`~table.interfaces.web`)
authenticates the client, makes a :class:`Channel` for it, and hands each
request to :meth:`Dispatcher.serve` with a ``send`` coroutine. The dispatcher

1. parses the request (JSON, an object; :data:`~table.interfaces.serving.MAX_LINE`
   bytes at most, bounded by the transport before it gets here);
2. checks the action is one of the API's (:mod:`~table.interfaces.api_schema`);
3. refuses an unauthenticated channel (``unauthenticated``) and a role that may
   not ask the action (``forbidden``; :data:`table.roles.PERMISSIONS`; the core
   checks again);
4. validates the arguments against the action's JSON Schema and the
   :mod:`table.roles` validators (non-blank, bounded, printable);
5. submits a command to the core's :class:`~table.console.Console` with the
   actor and the request id, or answers a query (``whoami``, ``events``,
   ``subscribe``, ``unsubscribe``) itself;
6. calls ``send`` exactly once with the reply, which names the request's id: the
   core's own answer passed through, or the front door's refusal with a
   ``code`` (``docs/schemas/api-reply-v1.schema.json``). When the core does not
   answer within ``reply_timeout_s`` the reply is ``timeout`` (the command may
   still take effect: ask for status).

Events for ``subscribe`` come from an :class:`EventHub`: the table's public
stream (:class:`table.events.EventLog`), replayed from the journal then live,
without gap or repeat, sealed as the channel may see it (58 Pa. Code 816a.1: a
seat's channel only for that seat's terminal).

Nothing a client sent is logged beyond a few characters (:func:`~table.interfaces.serving.clip`).
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import json
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

import jsonschema
import structlog

from table.console import Command, Console
from table.events import SCHEMA, SCHEMA_VERSION, Derived, EventLog, EventStreamError
from table.roles import Actor, InvalidArgument, Role, allowed, person_name, reason_text

from .api_schema import ACTIONS, API_SCHEMA, API_VERSION, QUERY_ROLES, Action
from .serving import MAX_LINE, FrontDoorLoop, clip

log = structlog.get_logger("table.api")

Send = Callable[[dict[str, Any]], Awaitable[None]]

#: a reply's error text is cut to this many characters (the reply schema's bound)
MAX_ERROR = 2000
#: events a subscriber may fall behind before its subscription ends (it resubscribes and loses nothing)
MAX_BACKLOG = 10_000
#: events read from the journal per replay step
REPLAY_BATCH = 256


def refusal(code: str, error: str, rid: Any = None) -> dict[str, Any]:
    """A front door's refusal: ``{"id": rid, "ok": false, "code": code, "error": error}``."""
    out: dict[str, Any] = {"ok": False, "code": code, "error": error[:MAX_ERROR]}
    return {"id": rid, **out} if rid is not None else out


def _valid_id(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return abs(value) < 2 ** 53
    return isinstance(value, str) and 1 <= len(value) <= 64 and value.isprintable()


def _describe(err: jsonschema.ValidationError, action: str) -> str:
    """A schema violation in words, naming the argument; never echoing a long value."""
    where = ".".join(str(p) for p in err.absolute_path) or action
    v = err.validator
    if v == "required":
        missing = next((r for r in err.validator_value if r not in (err.instance or {})), "?")
        return f"{action}: {missing} is required"
    if v == "additionalProperties":
        known = set(err.schema.get("properties", {}))
        extra = sorted(k for k in (err.instance or {}) if k not in known)
        return (f"{action}: unknown argument {clip(extra[0], 40)!s}; allowed: "
                f"{', '.join(sorted(known - {'id', 'action'})) or 'none'}")
    if v == "maxLength":
        return f"{where}: at most {err.validator_value} characters"
    if v == "minLength":
        return f"{where}: must not be empty"
    if v == "pattern":
        return f"{where}: {err.schema.get('description', 'not in the allowed form')}"
    if v in ("enum", "const"):
        allowed_ = err.validator_value if v == "enum" else [err.validator_value]
        return f"{where}: must be one of {', '.join(map(str, allowed_))}"
    if v == "type":
        t = err.validator_value
        return f"{where}: must be {' or '.join(t) if isinstance(t, list) else t}, got {type(err.instance).__name__}"
    if v in ("minimum", "maximum"):
        return f"{where}: must be {'at least' if v == 'minimum' else 'at most'} {err.validator_value}"
    if v == "oneOf":
        return f"{where}: {err.schema.get('description', 'not in an allowed form')}"
    return f"{where}: not valid ({v})"


# -- events ---------------------------------------------------------------------------------------


class Feed:
    """One subscriber's events: after ``after`` (replayed from the journal), then live,
    as channel ``seat`` sees them. :meth:`next` returns the next event dict, or raises
    ``EOFError`` once closed or overflowed (``overflowed`` set: the subscriber fell
    more than ``maxsize`` events behind; it resumes from ``last_seq``, the last event
    :meth:`next` returned)."""

    def __init__(self, hub: "EventHub", after: int, head: int, seat: int | None, maxsize: int) -> None:
        self.hub = hub
        self.after = after
        self.head = head
        self.seat = seat
        self.last_seq = after      # the last event handed out
        self._read = after         # the last event read from the journal or the live queue
        self.overflowed = False
        self.closed = False
        self._buffer: collections.deque[dict[str, Any]] = collections.deque()
        self._q: asyncio.Queue[Derived | None] = asyncio.Queue(maxsize)

    def _push(self, d: Derived) -> None:
        if self.closed or self.overflowed:
            return
        try:
            self._q.put_nowait(d)
        except asyncio.QueueFull:
            self.overflowed = True
            self.hub._drop(self)

    @property
    def pending(self) -> int:
        """Events read but not yet handed out, and live events waiting."""
        return len(self._buffer) + self._q.qsize()

    async def next(self) -> dict[str, Any]:
        if not self._buffer and self._read < self.head and not self.closed:
            batch = await self.hub.front.run_blocking(self.hub.replay_batch, self._read, self.head, self.seat)
            if batch:
                self._buffer.extend(batch)
                self._read = batch[-1]["seq"]
            else:
                self._read = self.head
        if self._buffer:
            ev = self._buffer.popleft()
            self.last_seq = ev["seq"]
            return ev
        while True:
            if self._q.empty() and (self.closed or self.overflowed):
                raise EOFError("subscription ended")
            d = await self._q.get()
            if d is None:
                raise EOFError("subscription closed")
            if d.seq <= self._read:
                continue  # already sent by the replay
            self._read = self.last_seq = d.seq
            return d.render(self.seat)

    def close(self) -> None:
        self.closed = True
        self.hub._drop(self)
        try:
            self._q.put_nowait(None)
        except asyncio.QueueFull:
            pass


class EventHub:
    """Fans the table's public events out to the front doors' subscribers on ``front``'s loop.

    One listener on ``events`` (:class:`~table.events.EventLog`, called in its
    pump thread) hands each event to the loop; each :class:`Feed` gets it
    there. Raises nothing at construction; :meth:`open` raises
    :class:`~table.events.EventStreamError` for a ``resume_from`` outside the
    stream or a seat outside 1..7.
    """

    def __init__(self, events: EventLog, front: FrontDoorLoop) -> None:
        self.events = events
        self.front = front
        self.table_id = events.table_id
        self._feeds: set[Feed] = set()
        events.add_listener(self._from_pump)

    def _from_pump(self, d: Derived) -> None:
        try:
            self.front.loop.call_soon_threadsafe(self._fanout, d)
        except RuntimeError:  # the loop is closed: the process is stopping
            pass

    def _fanout(self, d: Derived) -> None:
        for f in list(self._feeds):
            f._push(d)

    def _drop(self, f: Feed) -> None:
        self._feeds.discard(f)

    @property
    def head(self) -> int:
        return self.events.head

    def open(self, after: int | None, seat: int | None, maxsize: int = MAX_BACKLOG) -> Feed:
        """A feed of events with seq > ``after`` (None: from now on); call on the loop."""
        if seat is not None and not 1 <= seat <= 7:
            raise EventStreamError(f"seat must be 1..7, got {seat}")
        head = self.events.head
        start = head if after is None else after
        if start < 0 or start > head:
            raise EventStreamError(f"resume_from {start} is outside the stream (0..{head})")
        f = Feed(self, start, head, seat, maxsize)
        self._feeds.add(f)
        return f

    def replay_batch(self, after: int, upto: int, seat: int | None) -> list[dict[str, Any]]:
        """Up to :data:`REPLAY_BATCH` events after ``after`` (blocking: run it in the pool)."""
        it = self.events.replay(after, min(upto, after + REPLAY_BATCH), seat)
        try:
            return list(itertools.islice(it, REPLAY_BATCH))
        finally:
            close = getattr(it, "close", None)
            if close is not None:
                close()

    def close(self) -> None:
        self.events.remove_listener(self._from_pump)
        for f in list(self._feeds):
            f.close()


def channel_seat(actor: Actor, asked: int | None) -> int | None:
    """The event channel ``actor`` may have when asking for seat ``asked`` (None: no seat):
    a seat terminal its own seat's channel only (given when it asks for none); every
    other role the table-wide stream only (58 Pa. Code 816a.1: a seat's cards are
    sealed from everyone but that seat until decisions are final). Raises
    ``PermissionError`` naming the rule."""
    if actor.role is Role.SEAT:
        if asked is not None and asked != actor.seat:
            raise PermissionError(f"seat {asked}'s channel is only for seat {asked}'s terminal; "
                                  f"this terminal is seat {actor.seat}")
        return actor.seat
    if asked is not None:
        raise PermissionError(f"seat {asked}'s channel is only for seat {asked}'s terminal; "
                              f"{actor.role.value} gets the table-wide stream")
    return None


# -- channels -------------------------------------------------------------------------------------


@dataclass(eq=False)
class Channel:
    """One client connection as the dispatcher sees it.

    ``source``: the front door (``control-socket``, ``http``, ``websocket``);
    ``actor``: who is authenticated on it (``None``: nobody yet); ``push``: a
    coroutine sending an unsolicited message (events), ``None`` on plain HTTP;
    ``signed_in``: the actor is a signed-in person (HTTP/WebSocket), so a
    supervisor argument must be that person. ``proves_people``: the actor is an
    account, not a person (the Unix control socket): every supervisor action must
    name a person of the people file and prove it with their PIN (``supervisor``,
    ``pin``), and that person is who acts and who counts for the two-person rule
    (docs/decisions/0003-an-account-is-not-a-person.md). Otherwise an absent supervisor argument is filled with the
    actor's name. ``on_subscribe``:
    called with True/False when a subscription starts/ends (a transport lifts its
    idle timeout meanwhile). ``prove``: ``(person, pin) -> Actor``, this channel's own
    PIN check (the web's: the people file's, with the sign-in lock-outs of the
    client's address), used for a countersigning dealer (``table_procedure``); None:
    the dispatcher's ``prove``.
    """

    source: str
    actor: Actor | None
    push: Send | None = None
    signed_in: bool = False
    on_subscribe: Callable[[bool], None] | None = None
    proves_people: bool = False
    prove: Callable[[str, str], Actor] | None = field(default=None, repr=False)
    subscription: asyncio.Task[Any] | None = field(default=None, repr=False)
    feed: Feed | None = field(default=None, repr=False)

    def close(self) -> None:
        """End the channel's subscription (the connection has gone)."""
        if self.feed is not None:
            self.feed.close()
        if self.subscription is not None:
            self.subscription.cancel()


class Dispatcher:
    """Serves the table API (:mod:`~table.interfaces.api_schema`) for every transport.

    ``console``: the core's command queue; ``hub``: the event stream (``None``
    when the table runs without a journal: ``events``/``subscribe`` are then
    refused; with ``stream_pending`` the stream is still to come: ``busy``);
    ``front``: the loop the transports run on; ``reply_timeout_s``: how long a
    command may wait for the table's answer; ``prove``: ``(person, pin) -> Actor``,
    the people file's PIN check (:func:`~table.interfaces.terminal.pin_checker`) for
    channels that must prove people (``Channel.proves_people``); ``None``: nobody
    can be proved there, so their supervisor actions are refused.
    """

    def __init__(self, console: Console, front: FrontDoorLoop, *, hub: EventHub | None = None,
                 reply_timeout_s: float = 30.0, table_id: str = "table",
                 queries: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] | None = None,
                 stream_pending: bool = False, prove: Callable[[str, str], Actor] | None = None) -> None:
        self.console = console
        self.prove = prove
        #: read-only queries answered from the journal (audit_view.AuditQueries.handlers()):
        #: name -> a blocking function of the arguments, run in the pool
        self.queries = dict(queries or {})
        self.front = front
        self.hub = hub
        #: the table keeps a journal whose event stream is not attached yet (``tablectl run``
        #: opens its front doors before the devices): ``events``/``subscribe`` are ``busy`` till then
        self.stream_pending = stream_pending
        self.reply_timeout_s = reply_timeout_s
        self.table_id = hub.table_id if hub is not None else table_id
        self._validators = {name: jsonschema.Draft202012Validator(a.args_schema()) for name, a in ACTIONS.items()}
        self.counts = {"requests": 0, "refused": 0, "timeouts": 0}

    # -- entry points ---------------------------------------------------------------------------

    async def serve(self, channel: Channel, raw: bytes | str | dict[str, Any], send: Send) -> None:
        """Answer one request on ``channel`` by calling ``send`` exactly once (then, for
        ``subscribe``, start pushing events). Never raises for what a client sent."""
        try:
            reply, then = await self._answer(channel, raw)
        except Exception as exc:  # noqa: BLE001 - a bug here must still give the one reply
            log.error("dispatch_failed", error=f"{type(exc).__name__}: {clip(str(exc), 200)}")
            reply, then = refusal("internal", "the front door failed to handle this request"), None
        if reply.get("ok") is False:
            self.counts["refused"] += 1
        await send(reply)
        if then is not None:
            then()

    async def answer(self, channel: Channel, raw: bytes | str | dict[str, Any]) -> dict[str, Any]:
        """The one reply to a request (for transports without a push channel)."""
        box: list[dict[str, Any]] = []

        async def keep(reply: dict[str, Any]) -> None:
            box.append(reply)

        await self.serve(channel, raw, keep)
        return box[0]

    # -- the steps ------------------------------------------------------------------------------

    async def _answer(self, channel: Channel, raw: Any) -> tuple[dict[str, Any], Callable[[], None] | None]:
        self.counts["requests"] += 1
        if isinstance(raw, (bytes, bytearray, str)):
            if len(raw) > MAX_LINE:
                return refusal("too_large", f"a request is at most {MAX_LINE} bytes"), None
            try:
                req = json.loads(raw)
            except (ValueError, RecursionError) as exc:
                msg = exc.msg if isinstance(exc, json.JSONDecodeError) else "not JSON"
                return refusal("bad_request", f"bad request: not JSON ({clip(msg, 80)})"), None
        else:
            req = raw
        if not isinstance(req, dict):
            return refusal("bad_request", 'bad request: a request is a JSON object such as {"id": 1, "action": '
                                          '"status"}'), None
        rid = req.get("id")
        if rid is not None and not _valid_id(rid):
            return refusal("bad_request", "bad request: id must be a string of 1-64 printable characters or an "
                                          "integer"), None
        action_name = req.get("action")
        if not isinstance(action_name, str):
            return refusal("bad_request", "bad request: 'action' (a string) is required", rid), None
        action = ACTIONS.get(action_name)
        if action is None:
            return refusal("unknown_action", f"unknown action {clip(action_name, 40)}; allowed: "
                                             f"{', '.join(ACTIONS)}", rid), None
        actor = channel.actor
        if actor is None:
            return refusal("unauthenticated", "sign in first", rid), None
        if not self._may(actor, action):
            log.warning("api_forbidden", action=action.name, person=clip(actor.person), role=actor.role.value,
                        source=channel.source)
            return refusal("forbidden", f"{action.name} is for {', '.join(sorted(r.value for r in action.roles))}"
                                        f"; {actor.person} is signed in as {actor.role.value}", rid), None
        errors = sorted(self._validators[action.name].iter_errors(req), key=lambda e: (len(e.path), str(e.path)))
        if errors:
            return refusal("bad_request", f"bad request: {_describe(errors[0], action.name)}", rid), None
        args = {k: v for k, v in req.items() if k not in ("id", "action")}
        try:
            args = self._checked(channel, actor, action, args)
        except InvalidArgument as exc:
            return refusal("bad_request", f"bad request: {action.name}: {exc}", rid), None
        except PermissionError as exc:
            return refusal("forbidden", str(exc), rid), None
        pin = args.pop("pin", None)  # never journaled, logged or handed to the core
        if channel.proves_people and "supervisor" in action.args:
            proven = await self._proven(channel, action, args.get("supervisor") if "supervisor" in req else None,
                                        pin, rid)
            if isinstance(proven, dict):
                return proven, None
            actor, args["supervisor"] = proven, proven.person
        if action.name == "table_procedure":
            dealer = await self._countersigned(channel, args, actor, rid)
            if isinstance(dealer, dict):
                return dealer, None
        if action.name not in QUERY_ROLES:  # the core's: commands, and status
            reply = await self._command(channel, actor, action, args, rid)
            if action.name == "table_procedure" and reply.get("ok") and args.get("procedure") == "shift_change":
                await self._end_outgoing(channel, reply)
            return reply, None
        return await self._query(channel, actor, action, args, rid)

    async def _end_outgoing(self, channel: Channel, reply: dict[str, Any]) -> None:
        """A shift handed over (journaled): the outgoing dealer's sessions at this table's
        screens end (COMAR 36.05.03.10: the dealer who holds the shift deals and signs), so
        they place no bet and sign no slip after it. Nothing to end without a people file."""
        slip = reply.get("slip") if isinstance(reply.get("slip"), dict) else {}
        outgoing = slip.get("dealer")
        if slip.get("repeated") or not isinstance(outgoing, str):
            return
        for prove in {id(p): p for p in (channel.prove, self.prove) if p is not None}.values():
            end = getattr(prove, "end_sessions", None)
            if end is not None:
                await self.front.run_blocking(end, outgoing)

    async def _proven(self, channel: Channel, action: Action, person: Any, pin: Any, rid: Any) -> Actor | dict:
        """The supervisor a request on an account's channel names and proves with their PIN
        (the people file), or the refusal: an account (root, the service's own, a group's)
        is not a person, and the two-person rule counts people."""
        if self.prove is None:
            return refusal("forbidden", f"{action.name}: the control socket acts for people of the people file, "
                                        "and this table has none ([auth] people_file): use a signed-in screen", rid)
        if not isinstance(person, str) or not isinstance(pin, str):
            return refusal("forbidden", f"{action.name}: name the supervisor (a person of the people file) and "
                                        "give their PIN: {\"supervisor\": \"S-17\", \"pin\": \"...\"}; an "
                                        "account is not a person", rid)
        from .auth import SignInLocked

        try:
            proven = await self.front.run_blocking(self.prove, person, pin)
        except SignInLocked as exc:
            return refusal("locked", f"{action.name}: {exc}", rid)
        except PermissionError:
            log.warning("api_pin_refused", action=action.name, person=clip(person), account=clip(
                channel.actor.person if channel.actor else None), source=channel.source)
            return refusal("forbidden", f"{action.name}: unknown person or wrong PIN", rid)
        except Exception as exc:  # noqa: BLE001 - an unreadable people file: refused, said why
            return refusal("internal", f"{action.name}: the PIN cannot be checked ({clip(str(exc), 160)})", rid)
        if proven.role is not Role.SUPERVISOR:
            return refusal("forbidden", f"{action.name} is for supervisor; {proven.person} is {proven.role.value}",
                           rid)
        return Actor(proven.person, Role.SUPERVISOR, source=channel.source)

    async def _countersigned(self, channel: Channel, args: dict[str, Any], actor: Actor, rid: Any) -> Actor | dict:
        """The dealer who countersigns a table procedure (COMAR 36.05.03.10: a slip signed by
        the dealer and a supervisor), proved by their PIN (``dealer_pin``, removed from
        ``args``: never journaled nor logged) with the channel's check, or the refusal: a
        dealer of the people file, not the supervisor who asks (two people). A shift
        change's incoming dealer (``slip.opener``) is proved the same way by
        ``opener_pin``: a dealer, neither the outgoing one nor the supervisor."""
        pin = args.pop("dealer_pin", None)
        dealer = args.get("dealer")
        supervisor = args.get("supervisor") or actor.person
        if dealer == supervisor:
            return refusal("refused", f"table_procedure: {clip(dealer)} cannot sign as both dealer and supervisor: "
                                      "a slip needs two people (COMAR 36.05.03.10)", rid)
        prove = channel.prove or self.prove
        if prove is None:
            return refusal("forbidden", "table_procedure: the dealer's PIN cannot be checked here (this table has "
                                        "no people file, [auth] people_file)", rid)
        proven = await self._dealer_proven(channel, prove, dealer, pin, "the dealer", "dealer",
                                           "the slip is countersigned by a dealer", rid)
        if isinstance(proven, dict):
            return proven
        slip = args.get("slip") if isinstance(args.get("slip"), dict) else {}
        if args.get("procedure") == "drop" and ("counted_by" in slip or "verified_by" in slip):
            # the count room's two people are people of the people file, compared case-folded
            from table.day.gaming_day import count_room_problem

            people = getattr(prove, "people", None)
            if people is None:
                return refusal("forbidden", "table_procedure: the count room's people cannot be checked here (no "
                                            "people file)", rid)
            try:
                problem = count_room_problem(await self.front.run_blocking(people), slip.get("counted_by"),
                                             slip.get("verified_by"))
            except Exception as exc:  # noqa: BLE001 - an unreadable people file: refused, said why
                return refusal("internal", f"table_procedure: the people file cannot be read ({clip(str(exc), 160)})",
                               rid)
            if problem:
                return refusal("refused", f"table_procedure: {problem}", rid)
        opener_pin = args.pop("opener_pin", None)
        if args.get("procedure") == "shift_change":
            slip = args.get("slip") if isinstance(args.get("slip"), dict) else {}
            opener = slip.get("opener")
            if opener in (dealer, supervisor):
                return refusal("refused", f"table_procedure: the incoming dealer {clip(opener)} is the outgoing "
                                          "dealer or the supervisor: a shift change is taken over by another "
                                          "dealer", rid)
            incoming = await self._dealer_proven(channel, prove, opener, opener_pin,
                                                 "the incoming dealer (slip.opener, opener_pin)", "opener",
                                                 "a shift is taken over by a dealer", rid)
            if isinstance(incoming, dict):
                return incoming
        return proven

    async def _dealer_proven(self, channel: Channel, prove: Any, person: Any, pin: Any, who: str, role: str,
                             rule: str, rid: Any) -> Actor | dict:
        """``person`` proved by ``pin`` with the channel's check (the sign-in's lock-outs) as
        a dealer, or the refusal naming ``who`` (a wrong PIN is logged, never the PIN)."""
        from .auth import SignInLocked

        try:
            proven = await self.front.run_blocking(prove, person, pin)
        except SignInLocked as exc:
            return refusal("locked", f"table_procedure: {who}: {exc}", rid)
        except PermissionError:
            log.warning("api_pin_refused", action="table_procedure", person=clip(person), role=role,
                        source=channel.source)
            return refusal("forbidden", f"table_procedure: {who}: unknown person or wrong PIN", rid)
        except Exception as exc:  # noqa: BLE001 - an unreadable people file: refused, said why
            return refusal("internal", f"table_procedure: the PIN cannot be checked ({clip(str(exc), 160)})", rid)
        if proven.role is not Role.DEALER:
            return refusal("forbidden", f"table_procedure: {who} {proven.person} is {proven.role.value}; {rule}",
                           rid)
        return proven

    @staticmethod
    def _may(actor: Actor, action: Action) -> bool:
        if action.name in QUERY_ROLES:
            return actor.role in action.roles
        return allowed(actor, action.name)

    @staticmethod
    def _checked(channel: Channel, actor: Actor, action: Action, args: dict[str, Any]) -> dict[str, Any]:
        """The table.roles validators over the text arguments, and the supervisor rule."""
        for key in ("reason", "note"):
            if key in args:
                args[key] = reason_text(args[key], key)
        if "supervisor" in action.args:
            given = args.get("supervisor")
            if given is not None:
                given = person_name(given, "supervisor")
            if channel.signed_in:
                if given is not None and given != actor.person:
                    raise PermissionError(f"{action.name}: you are signed in as {actor.person}; the supervisor "
                                          "of a command is the person who gives it")
                args["supervisor"] = actor.person
            else:
                args["supervisor"] = given if given is not None else actor.person
        if "card" in args:
            args["card"] = args["card"].strip()
        return args

    async def _command(self, channel: Channel, actor: Actor, action: Action, args: dict[str, Any],
                       rid: Any) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[dict[str, Any]] = loop.create_future()

        def resolve(result: dict[str, Any]) -> None:
            if fut.done():
                log.warning("second_reply_dropped", action=action.name, id=clip(rid))
                return
            fut.set_result(dict(result))

        def reply(result: dict[str, Any]) -> None:  # the core's thread (or this one, for status)
            try:
                loop.call_soon_threadsafe(resolve, result)
            except RuntimeError:  # the loop has closed: nobody is left to answer
                pass

        push = channel.push

        def outcome(result: dict[str, Any]) -> None:  # the core's thread: what became of an accepted void
            msg = {"type": "result", "action": action.name, **({"id": rid} if rid is not None else {}), **result}

            async def send_it() -> None:
                try:
                    await push(msg)
                except (ConnectionError, OSError):
                    pass  # the client has gone: its void was still carried out (or not), and journaled

            try:
                asyncio.run_coroutine_threadsafe(send_it(), loop)
            except RuntimeError:  # the loop has closed
                pass

        try:
            # A void's later outcome (voided, held for a second supervisor, or not carried out)
            # is pushed on connections that can take a push (docs/console.md); HTTP polls status.
            self.console.submit(Command(action.name, args, reply, actor, rid,
                                        done=outcome if push is not None else None))
        except Exception as exc:  # noqa: BLE001 - the core refused in its own way: still one reply
            return refusal("internal", f"{action.name}: the table could not take it: {clip(str(exc), 200)}", rid)
        try:
            result = await asyncio.wait_for(asyncio.shield(fut), self.reply_timeout_s)
        except asyncio.TimeoutError:
            self.counts["timeouts"] += 1
            log.warning("api_reply_timeout", action=action.name, id=clip(rid), person=clip(actor.person))
            return refusal("timeout", f"{action.name}: the table did not answer within {self.reply_timeout_s:g} s; "
                                      "it may still take effect: ask for status", rid)
        if action.name != "status":
            log.info("api_command", action=action.name, id=clip(rid), person=clip(actor.person),
                     role=actor.role.value, source=channel.source, ok=result.get("ok"),
                     error=clip(result.get("error"), 120) if result.get("error") else None)
        result.pop("id", None)
        return {"id": rid, **result} if rid is not None else result

    # -- queries --------------------------------------------------------------------------------

    async def _query(self, channel: Channel, actor: Actor, action: Action, args: dict[str, Any],
                     rid: Any) -> tuple[dict[str, Any], Callable[[], None] | None]:
        def ok(**data: Any) -> dict[str, Any]:
            return {"id": rid, "ok": True, **data} if rid is not None else {"ok": True, **data}

        if action.name == "whoami":
            return ok(**actor.to_dict(), api=API_SCHEMA, api_version=API_VERSION, table_id=self.table_id), None
        if action.push and channel.push is None:
            return refusal("bad_request", f"{action.name} needs a connection the table can push on: the "
                                          "WebSocket /api/v1/ws or the control socket; over HTTP poll "
                                          "GET /api/v1/events", rid), None
        if action.name in ("shuffle_check", "audit_status", "history", "day_report"):
            handler = self.queries.get(action.name)
            if handler is None:
                return refusal("bad_request", f"{action.name}: this table runs without a journal, so it has "
                                              "nothing to check", rid), None
            try:
                result = await self.front.run_blocking(handler, args)
            except ValueError as exc:  # a report that cannot be counted as asked (ReportError): said why
                return refusal("bad_request", f"{action.name}: {clip(str(exc), 300)}", rid), None
            except Exception as exc:  # noqa: BLE001 - an unreadable journal is an answer, not a crash
                log.error("query_failed", action=action.name, error=f"{type(exc).__name__}: {clip(str(exc), 200)}")
                return refusal("internal", f"{action.name}: the journal could not be read: "
                                           f"{clip(str(exc), 200)}", rid), None
            return ok(**result), None
        if action.name == "unsubscribe":
            had = channel.feed is not None
            channel.close()
            channel.feed = channel.subscription = None
            if had and channel.on_subscribe is not None:
                channel.on_subscribe(False)
            return ok(unsubscribed=had), None
        if self.hub is None:
            if self.stream_pending:
                return refusal("busy", f"{action.name}: the table is starting and its event stream is not open "
                                       "yet; try again in a moment", rid), None
            return refusal("bad_request", f"{action.name}: this table runs without a journal, so it has no event "
                                          "stream", rid), None
        try:
            seat = channel_seat(actor, args.get("seat"))
        except PermissionError as exc:
            return refusal("forbidden", str(exc), rid), None
        if action.name == "events":
            after = args.get("after", 0)
            limit = args.get("limit", 100)
            head = self.hub.head
            if after > head:
                return refusal("bad_request", f"after {after} is beyond the stream's head {head}", rid), None
            evs = await self.front.run_blocking(
                lambda: list(itertools.islice(self.hub.events.replay(after, min(head, after + limit), seat), limit)))
            return ok(events=evs, head_seq=head, seat=seat), None
        # subscribe
        if channel.feed is not None:
            return refusal("bad_request", "this connection is already subscribed; unsubscribe first", rid), None
        try:
            feed = self.hub.open(args.get("resume_from"), seat)
        except EventStreamError as exc:
            return refusal("bad_request", f"bad request: {exc}", rid), None
        channel.feed = feed
        hello = {"type": "hello", "schema": SCHEMA, "schema_version": SCHEMA_VERSION, "table_id": self.table_id,
                 "head_seq": feed.head, "resume_from": feed.after, "seat": feed.seat}
        with_status = bool(args.get("status"))

        def start() -> None:
            if channel.on_subscribe is not None:
                channel.on_subscribe(True)
            channel.subscription = asyncio.get_running_loop().create_task(self._pump(channel, feed, with_status))

        return ok(subscribed=hello), start

    async def _pump(self, channel: Channel, feed: Feed, with_status: bool) -> None:
        assert channel.push is not None
        try:
            while True:
                try:
                    ev = await feed.next()
                except EOFError:
                    if feed.overflowed:
                        await channel.push({"type": "subscription_ended", "last_seq": feed.last_seq,
                                            "error": "the subscriber fell behind; subscribe again with "
                                                     "resume_from = last_seq"})
                    return
                await channel.push(ev)
                if with_status and feed.pending == 0 and channel.actor is not None:
                    status = await self._command(channel, channel.actor, ACTIONS["status"], {}, None)
                    status.pop("ok", None)
                    await channel.push({"type": "status", "status": status})
        except (ConnectionError, OSError):
            return
        finally:
            feed.close()
            if channel.feed is feed:
                channel.feed = None
                if channel.on_subscribe is not None:
                    channel.on_subscribe(False)
