"""The gateway side of the approval service, in Python: the twin of the Rust ``countersign-client``.

``Gateway.authorize`` is the whole rule in one call:

1. create the approval request (``POST /v1/approvals``, bearer token), with a timeout: no answer
   in time, or any transport error, is DENY ``callback_timeout``;
2. follow the redrive URL (long polls) until the request settles or ``expires_at`` passes, which is
   DENY ``expired_unanswered``;
3. verify the evidence with the Rust core against the registry *this gateway* trusts and its
   *current* policy, never a registry or an assurance level the answer carries;
4. collect the single-use grant with the fingerprint of the exact call about to run.

Every failure is a DENY with a reason code, returned as an ``Authorization`` (or raised as
``Denied`` by the decorator). Nothing here returns "maybe", and no transport error escapes as an
exception that a caller might swallow into "proceed".
"""

from __future__ import annotations

import functools
import inspect
import ipaddress
import json
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Dict, Optional, Tuple, TypeVar, Union

from ._native import (
    Action,
    Policy,
    Registry,
    ReplayState,
    Verdict,
    op_hash,
    verify_evidence,
)
from ._reason import ReasonCode

TOOL_CALL_PROFILE = "countersign.tool-call/1"

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Grant:
    """Permission to run exactly one call, once (the service hands it out a single time)."""

    approval_id: str
    fingerprint: str
    collected_at: str


class Denied(Exception):
    """The call must not run. ``reason_code`` says why; ``verdict`` is the verifier's, if any."""

    def __init__(
        self,
        reason_code: ReasonCode,
        detail: str,
        approval_id: Optional[str] = None,
        verdict: Optional[Verdict] = None,
    ) -> None:
        super().__init__(f"{reason_code.value}: {detail}")
        self.reason_code = reason_code
        self.detail = detail
        self.approval_id = approval_id
        self.verdict = verdict


class Held(Denied):
    """The call is held until a human decides: not run, not refused yet.

    A subclass of ``Denied`` on purpose: an integration written before approvals existed, whose
    ``except Denied:`` handles refusals, also stops on a held call instead of running it.
    ``approver_url`` is the page the approver opens; call again with the same arguments once
    approved (or pass ``wait=True`` to the decorator).
    """

    def __init__(
        self, approval_id: str, approver_url: str, expires_at: Optional[str], detail: str
    ) -> None:
        super().__init__(ReasonCode.PENDING, detail, approval_id=approval_id)
        self.approver_url = approver_url
        self.expires_at = expires_at


@dataclass(frozen=True)
class Authorization:
    """The outcome of ``Gateway.authorize``: a grant, or a DENY with its reason.

    Has no truth value (``if auth:`` raises TypeError): test ``allowed``.
    """

    allowed: bool
    reason_code: Optional[ReasonCode]
    detail: str
    approval_id: Optional[str] = None
    grant: Optional[Grant] = None
    verdict: Optional[Verdict] = None
    approver_url: Optional[str] = None

    def __bool__(self) -> bool:
        raise TypeError("an Authorization has no truth value: test .allowed")

    def raise_for_denial(self) -> Grant:
        """The grant, or ``Denied`` carrying the reason."""
        if self.allowed and self.grant is not None:
            return self.grant
        raise Denied(
            self.reason_code or ReasonCode.RESULT_MALFORMED,
            self.detail,
            approval_id=self.approval_id,
            verdict=self.verdict,
        )


class _Answer(dict):  # type: ignore[type-arg]
    """A JSON object the service answered, with the exact bytes it was read from."""

    raw: bytes = b""


class _Refusal(Exception):
    """Internal: one step refused; becomes a DENY Authorization."""

    def __init__(
        self,
        reason_code: ReasonCode,
        detail: str,
        verdict: Optional[Verdict] = None,
    ) -> None:
        super().__init__(detail)
        self.reason_code = reason_code
        self.detail = detail
        self.verdict = verdict


@dataclass
class _Call:
    """The exact call: its signed action and the grant fingerprint."""

    agent_id: str
    tool_name: str
    params_json: str
    profile: str
    action: Action = field(init=False)
    fingerprint: str = field(init=False)

    def __post_init__(self) -> None:
        if self.profile == TOOL_CALL_PROFILE:
            fields = (
                '{"agent_id":' + json.dumps(self.agent_id, ensure_ascii=False)
                + ',"tool_name":' + json.dumps(self.tool_name, ensure_ascii=False)
                + ',"params":' + self.params_json + "}"
            )
        else:
            fields = self.params_json
        # The tool is part of the action: the core checks it against the signed tool_name (or
        # the policy's profile_tools binding), so evidence for one tool never runs another.
        self.action = Action(self.profile, fields, tool=self.tool_name)
        # Raises UnusableInput when the fields are inadmissible: refused before asking anyone.
        self.fingerprint = op_hash(self.profile, "APPROVED", fields)

    def request_body(self, severity: Optional[str]) -> bytes:
        # params go out as the exact text the tool will receive, never re-serialized.
        body = (
            '{"agent_id":' + json.dumps(self.agent_id, ensure_ascii=False)
            + ',"tool_name":' + json.dumps(self.tool_name, ensure_ascii=False)
            + ',"params":' + self.params_json
        )
        if self.profile != TOOL_CALL_PROFILE:
            body += ',"profile":' + json.dumps(self.profile)
        if severity is not None:
            body += ',"severity":' + json.dumps(severity)
        return (body + "}").encode("utf-8")


def _parse_time(text: Optional[str]) -> Optional[datetime]:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


class Gateway:
    """A gateway's connection to one approval service.

    ``Gateway(service_url, token, registry, policy, replay, timeout)``:

    - ``service_url``: the approval service, e.g. ``"https://approvals.example.com"``;
    - ``token``: this gateway's bearer token (``countersign gateway add NAME`` prints it), sent
      with every gateway call;
    - ``registry``, ``policy``: what *this gateway* trusts and demands (``Registry``,
      ``Policy``); replace them at any time with ``set_registry`` / ``set_policy``;
    - ``replay``: the ``ReplayState`` (``ReplayState.sqlite(path)`` in production);
    - ``timeout``: seconds the service may take to answer one request (mandatory).

    Optional: ``agent_id`` (the default for the decorator), ``poll_wait`` (seconds one long poll
    asks the service to hold, default 20), ``max_hold`` (stop following a request after this
    long and withdraw it, default 3600), ``clock`` (a function returning an aware ``datetime``),
    ``on_pending(approval_id, approver_url)`` (called once for each new pending request, e.g. to
    post the approver link to a chat; if it raises, the call is DENIED).
    """

    def __init__(
        self,
        service_url: str,
        token: str,
        registry: Registry,
        policy: Policy,
        replay: ReplayState,
        timeout: float,
        *,
        agent_id: Optional[str] = None,
        poll_wait: float = 20.0,
        max_hold: float = 3600.0,
        clock: Optional[Callable[[], datetime]] = None,
        on_pending: Optional[Callable[[str, str], None]] = None,
    ) -> None:
        if not isinstance(registry, Registry):
            raise TypeError("registry must be a countersign.Registry")
        if not isinstance(policy, Policy):
            raise TypeError("policy must be a countersign.Policy")
        if not isinstance(replay, ReplayState):
            raise TypeError("replay must be a countersign.ReplayState")
        if not timeout or timeout <= 0:
            raise ValueError("timeout must be a positive number of seconds")
        if poll_wait < 1 or max_hold <= 0:
            raise ValueError("poll_wait must be >= 1 second and max_hold positive")
        parsed = urllib.parse.urlsplit(service_url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ValueError(f"service_url {service_url!r} is not an http(s) URL")
        self._base = service_url if service_url.endswith("/") else service_url + "/"
        self._token = token
        self._trust_lock = threading.Lock()
        self._registry = registry
        self._policy = policy
        self._replay = replay
        self.timeout = float(timeout)
        self.agent_id = agent_id
        self.poll_wait = float(poll_wait)
        self.max_hold = float(max_hold)
        self._clock = clock or (lambda: datetime.now(timezone.utc))
        self._on_pending = on_pending
        # The decorator's held calls: fingerprint -> approval id (one per exact call).
        self._held: Dict[str, str] = {}
        self._held_lock = threading.Lock()
        # No proxies from the environment: the bearer token goes to service_url and nowhere else.
        self._opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({}), _NoRedirect()
        )

    def __repr__(self) -> str:
        return f"Gateway({self._base!r})"

    # -- trust ---------------------------------------------------------------------------------

    def set_policy(self, policy: Policy) -> None:
        """Replace the policy; it applies to every verification from now on."""
        if not isinstance(policy, Policy):
            raise TypeError("policy must be a countersign.Policy")
        with self._trust_lock:
            self._policy = policy

    def set_registry(self, registry: Registry) -> None:
        """Replace the trusted registry (e.g. after a revocation)."""
        if not isinstance(registry, Registry):
            raise TypeError("registry must be a countersign.Registry")
        with self._trust_lock:
            self._registry = registry

    # -- the rule ------------------------------------------------------------------------------

    def authorize(
        self,
        tool_name: str,
        params_json: Union[str, bytes],
        agent_id: str,
        *,
        profile: str = TOOL_CALL_PROFILE,
        severity: Optional[str] = None,
    ) -> Authorization:
        """Request, wait, verify, collect: an ``Authorization`` with a grant, or a DENY.

        ``params_json`` is the JSON text of the arguments exactly as the tool will receive them.
        Never raises for a refusal, a timeout or a transport error: those are DENY verdicts.
        """
        approval_id: Optional[str] = None
        try:
            call = self._call(agent_id, tool_name, params_json, profile)
            first = self._create(call, severity)
            approval_id = first.get("approval_id")
            result = self._follow(first, deadline=None)
            return self._finish(call, result, approval_id)
        except _Refusal as r:
            return Authorization(False, r.reason_code, r.detail, approval_id, verdict=r.verdict)
        except Exception as e:  # fail closed on anything unforeseen, never "proceed"
            return Authorization(
                False, ReasonCode.RESULT_MALFORMED, f"{type(e).__name__}: {e}", approval_id
            )

    def requires_approval(
        self,
        tool: str,
        *,
        agent_id: Optional[str] = None,
        wait: bool = False,
        max_wait: float = 300.0,
        severity: Optional[str] = None,
    ) -> Callable[[F], F]:
        """Decorate a tool function: it runs only with a collected grant for exactly these
        arguments.

        The arguments (bound to the function's signature, defaults applied) are the call's
        ``params``, as JSON. The first call creates the approval request and raises ``Held``
        (approval id, approver link). Called again with the same arguments, it checks that
        request: still pending raises ``Held`` again; approved, verified and granted runs the
        function; anything else raises ``Denied``. With ``wait=True`` the first call waits
        (at most ``max_wait`` seconds, then ``Held``). Arguments that changed after approval
        (another call, or an argument mutated while waiting) never run under that grant.
        """
        if max_wait < 0:
            raise ValueError("max_wait must be >= 0")

        def decorate(fn: F) -> F:
            signature = inspect.signature(fn)

            @functools.wraps(fn)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                who = agent_id or self.agent_id
                if not who:
                    raise ValueError("no agent_id: pass it to Gateway(...) or requires_approval")
                params = _params_json(signature, args, kwargs)
                grant = self._hold(tool, params, who, wait, max_wait, severity)
                # The exact arguments must still be the approved ones when the function runs.
                if _params_json(signature, args, kwargs) != params:
                    raise Denied(
                        ReasonCode.BINDING_MISMATCH,
                        "the arguments changed after they were approved",
                        approval_id=grant.approval_id,
                    )
                return fn(*args, **kwargs)

            return wrapper  # type: ignore[return-value]

        return decorate

    # -- steps ---------------------------------------------------------------------------------

    def _hold(
        self,
        tool: str,
        params_json: str,
        agent_id: str,
        wait: bool,
        max_wait: float,
        severity: Optional[str],
    ) -> Grant:
        """The decorator's flow: a grant, or raise ``Held`` / ``Denied``."""
        approval_id: Optional[str] = None
        try:
            call = self._call(agent_id, tool, params_json, TOOL_CALL_PROFILE)
            with self._held_lock:
                approval_id = self._held.get(call.fingerprint)
            if approval_id is None:
                first = self._create(call, severity)
                approval_id = first.get("approval_id")
                if first.get("status") == "PENDING" and approval_id:
                    with self._held_lock:
                        self._held[call.fingerprint] = approval_id
            else:
                first = self._get(approval_id, 0)
            deadline = time.monotonic() + (max_wait if wait else 0.0)
            result = self._follow(first, deadline=deadline)
            if result.get("status") == "PENDING":
                raise Held(
                    approval_id or "",
                    self._approver_url(approval_id or ""),
                    result.get("expires_at"),
                    "waiting for an approver",
                )
            with self._held_lock:
                self._held.pop(call.fingerprint, None)
            auth = self._finish(call, result, approval_id)
        except Denied:
            raise
        except _Refusal as r:
            with self._held_lock:
                for k in [k for k, v in self._held.items() if v == approval_id]:
                    del self._held[k]
            raise Denied(r.reason_code, r.detail, approval_id=approval_id, verdict=r.verdict) from None
        except Exception as e:  # fail closed
            raise Denied(
                ReasonCode.RESULT_MALFORMED, f"{type(e).__name__}: {e}", approval_id=approval_id
            ) from e
        return auth.raise_for_denial()

    def _call(
        self, agent_id: str, tool_name: str, params_json: Union[str, bytes], profile: str
    ) -> _Call:
        if isinstance(params_json, bytes):
            try:
                params_json = params_json.decode("utf-8")
            except UnicodeDecodeError as e:
                raise _Refusal(ReasonCode.ACTION_INADMISSIBLE, f"params: {e}") from None
        if not isinstance(params_json, str):
            raise TypeError("params_json must be the JSON text of the arguments (str or bytes)")
        try:
            parsed = json.loads(params_json)
        except ValueError as e:
            raise _Refusal(ReasonCode.ACTION_INADMISSIBLE, f"params: {e}") from None
        if not isinstance(parsed, dict):
            raise _Refusal(ReasonCode.ACTION_INADMISSIBLE, "params must be a JSON object")
        try:
            return _Call(agent_id, tool_name, params_json, profile)
        except ValueError as e:  # UnusableInput: inadmissible or unknown profile
            code = getattr(e, "reason_code", None) or "action_inadmissible"
            raise _Refusal(ReasonCode(code), getattr(e, "reason", str(e))) from None

    def _create(self, call: _Call, severity: Optional[str]) -> Dict[str, Any]:
        first = self._request("POST", "v1/approvals", call.request_body(severity), self.timeout)
        approval_id = first.get("approval_id")
        if first.get("status") == "PENDING" and isinstance(approval_id, str) and approval_id:
            if self._on_pending is not None:
                try:
                    self._on_pending(approval_id, self._approver_url(approval_id))
                except Exception as e:
                    self.withdraw(approval_id)
                    raise _Refusal(
                        ReasonCode.RESULT_MALFORMED, f"on_pending raised {type(e).__name__}: {e}"
                    ) from None
        return first

    def _get(self, approval_id: str, wait: int) -> Dict[str, Any]:
        path = f"v1/approvals/{urllib.parse.quote(approval_id, safe='')}"
        if wait > 0:
            path += f"?wait={wait}"
        return self._request("GET", path, None, wait + self.timeout)

    def _follow(self, result: Dict[str, Any], deadline: Optional[float]) -> Dict[str, Any]:
        """Long-poll until settled, expired, past ``deadline`` (monotonic) or ``max_hold``."""
        started = time.monotonic()
        approval_id = result.get("approval_id")
        if result.get("status") != "PENDING":
            return result
        if not isinstance(approval_id, str) or not approval_id:
            raise _Refusal(ReasonCode.RESULT_MALFORMED, "PENDING without approval_id")
        expires = _parse_time(result.get("expires_at"))
        if expires is None or expires.tzinfo is None:
            raise _Refusal(ReasonCode.RESULT_MALFORMED, "PENDING without a valid expires_at")
        self._check_redrive(approval_id, result.get("redrive_url"))
        while result.get("status") == "PENDING":
            now = self._clock()
            if now >= expires:
                raise _Refusal(
                    ReasonCode.EXPIRED_UNANSWERED, "the approval window closed with no verdict"
                )
            if deadline is not None and time.monotonic() >= deadline:
                return result
            if time.monotonic() - started >= self.max_hold:
                self.withdraw(approval_id)
                raise _Refusal(
                    ReasonCode.CANCELLED, "gave up waiting (max_hold) and withdrew the request"
                )
            left = (expires - now).total_seconds()
            wait = min(self.poll_wait, max(left, 1.0))
            if deadline is not None:
                wait = min(wait, max(deadline - time.monotonic(), 0.0))
            result = self._get(approval_id, max(int(wait), 0) if wait >= 1 else 0)
            if result.get("approval_id") not in (None, approval_id):
                raise _Refusal(
                    ReasonCode.RESULT_MALFORMED,
                    f"asked about {approval_id}, the answer is about {result.get('approval_id')}",
                )
            if deadline is not None and wait < 1 and result.get("status") == "PENDING":
                return result
        return result

    def _finish(
        self, call: _Call, result: Dict[str, Any], approval_id: Optional[str]
    ) -> Authorization:
        """Verify the settled result with this gateway's trust, then collect the grant."""
        with self._trust_lock:
            registry, policy = self._registry, self._policy
        # The exact bytes the service sent: the core's result parser sees them, not a re-encoding.
        raw = result.raw if isinstance(result, _Answer) else json.dumps(result).encode()
        verdict = verify_evidence(
            call.action,
            raw,
            registry,
            policy,
            self._replay,
            self._clock(),
        )
        if not verdict.allowed:
            code = verdict.reason_code or ReasonCode.APPROVER_REFUSED
            raise _Refusal(code, verdict.detail or f"verdict DENY ({code.value})", verdict)
        if not approval_id:
            raise _Refusal(ReasonCode.RESULT_MALFORMED, "an approval without approval_id")
        grant = self._collect(approval_id, call)
        return Authorization(True, None, "granted", approval_id, grant, verdict)

    def _collect(self, approval_id: str, call: _Call) -> Grant:
        path = f"v1/approvals/{urllib.parse.quote(approval_id, safe='')}/grant"
        # The tool is named too: a typed profile's fingerprint covers the arguments, not the tool.
        body = json.dumps({"fingerprint": call.fingerprint, "tool_name": call.tool_name}).encode()
        answer = self._request("POST", path, body, self.timeout)
        try:
            grant = Grant(
                str(answer["approval_id"]), str(answer["fingerprint"]), str(answer["collected_at"])
            )
        except (KeyError, TypeError):
            raise _Refusal(ReasonCode.RESULT_MALFORMED, "grant: not a grant") from None
        if grant.fingerprint != call.fingerprint or grant.approval_id != approval_id:
            raise _Refusal(ReasonCode.BINDING_MISMATCH, "the grant is for another call")
        return grant

    def withdraw(self, approval_id: str) -> None:
        """Best-effort withdrawal of a pending request (errors are ignored)."""
        path = f"v1/approvals/{urllib.parse.quote(approval_id, safe='')}/withdraw"
        try:
            self._request("POST", path, b"{}", self.timeout)
        except Exception:
            pass

    # -- transport -----------------------------------------------------------------------------

    def _approver_url(self, approval_id: str) -> str:
        return urllib.parse.urljoin(self._base, f"approve/{urllib.parse.quote(approval_id, safe='')}")

    def _check_redrive(self, approval_id: str, given: Optional[str]) -> None:
        """The redrive URL must point back at the service we asked (no open redirects)."""
        if given is None:
            return
        parsed = urllib.parse.urlsplit(given)
        # A service names itself as a browser opens it: `localhost` for a loopback address. A
        # gateway configured with 127.0.0.1 then gets a redrive URL on localhost, same port: the
        # same service (the polls go to the configured URL either way).
        if _browser_origin(parsed) != _browser_origin(urllib.parse.urlsplit(self._base)):
            raise _Refusal(
                ReasonCode.RESULT_MALFORMED, f"redrive_url {given} is not on the service's origin"
            )
        expected = urllib.parse.urlsplit(self._base).path + "v1/approvals/" + approval_id
        if parsed.path != expected:
            raise _Refusal(
                ReasonCode.RESULT_MALFORMED, f"redrive_url {given} is not this approval's URL"
            )

    def _request(
        self, method: str, path: str, body: Optional[bytes], timeout: float
    ) -> Dict[str, Any]:
        """One call: the JSON object answered, or a ``_Refusal`` (transport errors are
        ``callback_timeout``; error envelopes carry the service's reason code)."""
        url = urllib.parse.urljoin(self._base, path)
        request = urllib.request.Request(url, data=body, method=method)
        request.add_header("Authorization", f"Bearer {self._token}")
        request.add_header("Accept", "application/json")
        if body is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with self._opener.open(request, timeout=timeout) as response:
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as e:
            try:
                raw = e.read()
            except Exception:
                raw = b""
            raise _error_refusal(e.code, raw) from None
        except (urllib.error.URLError, socket.timeout, TimeoutError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise _Refusal(ReasonCode.CALLBACK_TIMEOUT, f"{method} {path}: {reason}") from None
        except Exception as e:  # http.client errors (bad status line, incomplete read)
            raise _Refusal(
                ReasonCode.CALLBACK_TIMEOUT, f"{method} {path}: {type(e).__name__}: {e}"
            ) from None
        if not 200 <= status < 300:
            raise _error_refusal(status, raw)
        try:
            answer = json.loads(raw)
        except ValueError:
            raise _Refusal(ReasonCode.RESULT_MALFORMED, f"{method} {path}: not JSON") from None
        if not isinstance(answer, dict):
            raise _Refusal(ReasonCode.RESULT_MALFORMED, f"{method} {path}: not a JSON object")
        out = _Answer(answer)
        out.raw = raw
        return out


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Redirects are refused: the bearer token must not follow one, and the service sends none."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def]
        return None


def _error_refusal(status: int, raw: bytes) -> _Refusal:
    """A refusal from the service's JSON error envelope."""
    try:
        error = json.loads(raw)["error"]
        code, message = str(error["code"]), str(error.get("message", ""))
        wire = error.get("reason_code")
    except Exception:
        return _Refusal(ReasonCode.RESULT_MALFORMED, f"HTTP {status}")
    try:
        reason = ReasonCode(wire) if wire else ReasonCode.RESULT_MALFORMED
    except ValueError:
        reason = ReasonCode.RESULT_MALFORMED
    return _Refusal(reason, f"HTTP {status} {code}: {message}")


def _params_json(signature: inspect.Signature, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> str:
    """The call's arguments as the JSON object the approver signs (sorted keys, no NaN)."""
    bound = signature.bind(*args, **kwargs)
    bound.apply_defaults()
    try:
        return json.dumps(
            dict(bound.arguments), ensure_ascii=False, allow_nan=False, sort_keys=True,
            separators=(",", ":"),
        )
    except (TypeError, ValueError) as e:
        raise Denied(
            ReasonCode.ACTION_INADMISSIBLE, f"the arguments are not JSON: {e}"
        ) from None


def _browser_origin(url: urllib.parse.SplitResult) -> Tuple[str, Optional[str], Optional[int]]:
    """``(scheme, host, port)`` as a browser names the service: a loopback or unspecified IP
    address is ``localhost`` (the rule of ``countersign::browser_url`` in the Rust core)."""
    host = url.hostname
    try:
        port = url.port or {"http": 80, "https": 443}.get(url.scheme)
    except ValueError:
        return (url.scheme, None, None)
    if host is not None:
        try:
            ip = ipaddress.ip_address(host)
        except ValueError:
            pass
        else:
            if ip.is_loopback or ip.is_unspecified:
                host = "localhost"
    return (url.scheme, host, port)
