"""The gateway helper against a real `countersign serve` on loopback, a software authenticator
approving through the approver API."""

import json
import socket
import threading
import time

import pytest

import countersign
from countersign import Denied, Held, ReasonCode
from countersign._native import testing

from support import Approver, Service, http

QUICK = '[[tools]]\nname = "quick"\napproval_seconds = 1\n'


@pytest.fixture
def service(countersign_bin, tmp_path):
    alice = testing.SoftAuthenticator("alice-es256")
    svc = Service(countersign_bin, tmp_path, {"alice@example.com": alice}, QUICK)
    svc.alice = Approver(svc.base, alice)
    yield svc
    svc.stop()


def gateway(svc, tmp_path, **kw):
    kw.setdefault("agent_id", "agent-7")
    kw.setdefault("poll_wait", 5)
    return countersign.Gateway(
        svc.base,
        svc.token,
        countersign.Registry.from_json(svc.registry_json),
        countersign.Policy(testing.RP_ID, [testing.ORIGIN]),
        countersign.ReplayState.sqlite(tmp_path / "replay.sqlite"),
        timeout=10,
        **kw,
    )


def test_approve_verify_and_collect_the_grant_once(service, tmp_path):
    gw = gateway(service, tmp_path, on_pending=lambda id, url: service.alice.approve(id))
    params = '{"amount":"40000.00","to":"account-A"}'
    auth = gw.authorize("payments.transfer", params, "agent-7")
    assert auth.allowed, auth.detail
    assert auth.verdict.allowed and auth.verdict.assurance_level == "AAL2"
    assert [a["principal"] for a in auth.verdict.approvers] == ["alice@example.com"]
    fingerprint = countersign.op_hash(
        countersign.TOOL_CALL_PROFILE, "APPROVED",
        '{"agent_id":"agent-7","tool_name":"payments.transfer","params":' + params + "}",
    )
    assert auth.grant.fingerprint == fingerprint and auth.grant.approval_id == auth.approval_id
    # The grant is handed out once: a second collection is refused by the service...
    status, body = http(
        "POST", f"{service.base}/v1/approvals/{auth.approval_id}/grant",
        {"fingerprint": fingerprint}, service.token,
    )
    assert status == 409 and body["error"]["code"] == "grant_already_collected", body
    # ...and the same evidence presented to this gateway again is a replay.
    _, result = http("GET", f"{service.base}/v1/approvals/{auth.approval_id}", token=service.token)
    again = countersign.verify_evidence(
        countersign.Action(countersign.TOOL_CALL_PROFILE,
                           '{"agent_id":"agent-7","tool_name":"payments.transfer","params":' + params + "}"),
        json.dumps(result), countersign.Registry.from_json(service.registry_json),
        countersign.Policy(testing.RP_ID, [testing.ORIGIN]),
        countersign.ReplayState.sqlite(tmp_path / "replay.sqlite"),
    )
    assert again.reason_code is ReasonCode.REPLAYED


def test_a_refusal_is_a_deny_with_the_approver(service, tmp_path):
    gw = gateway(service, tmp_path, on_pending=lambda id, url: service.alice.refuse(id))
    auth = gw.authorize("payments.transfer", '{"amount":"1.00"}', "agent-7")
    assert not auth.allowed and auth.grant is None
    assert auth.reason_code is ReasonCode.APPROVER_REFUSED
    assert auth.verdict.decision == "DENIED"
    with pytest.raises(Denied) as e:
        auth.raise_for_denial()
    assert e.value.reason_code is ReasonCode.APPROVER_REFUSED


def test_an_unanswered_request_expires(service, tmp_path):
    gw = gateway(service, tmp_path)
    auth = gw.authorize("quick", '{"n":"1"}', "agent-7")
    assert not auth.allowed
    assert auth.reason_code is ReasonCode.EXPIRED_UNANSWERED


def test_a_service_that_never_answers_is_a_callback_timeout(tmp_path):
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # accepts connections (the kernel does) and never answers
    try:
        gw = countersign.Gateway(
            f"http://127.0.0.1:{silent.getsockname()[1]}", "token",
            countersign.Registry.from_json('{"credentials": []}'),
            countersign.Policy(testing.RP_ID, [testing.ORIGIN]),
            countersign.ReplayState.memory(), timeout=0.5,
        )
        auth = gw.authorize("payments.transfer", '{"n":"1"}', "agent-7")
        assert not auth.allowed and auth.reason_code is ReasonCode.CALLBACK_TIMEOUT
    finally:
        silent.close()


def test_nothing_listening_is_a_callback_timeout():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    gw = countersign.Gateway(
        f"http://127.0.0.1:{port}", "token", countersign.Registry.from_json('{"credentials": []}'),
        countersign.Policy(testing.RP_ID, [testing.ORIGIN]), countersign.ReplayState.memory(),
        timeout=2,
    )
    auth = gw.authorize("payments.transfer", '{"n":"1"}', "agent-7")
    assert auth.reason_code is ReasonCode.CALLBACK_TIMEOUT


def test_the_decorator_holds_then_runs_only_the_approved_arguments(service, tmp_path):
    gw = gateway(service, tmp_path)
    ran = []

    @gw.requires_approval(tool="payments.transfer")
    def transfer(amount: str, to: str):
        ran.append((amount, to))
        return "sent"

    with pytest.raises(Held) as held:
        transfer("40000.00", "account-A")
    assert held.value.reason_code is ReasonCode.PENDING
    assert held.value.approver_url.endswith(f"/approve/{held.value.approval_id}")
    # An integration written before approvals existed catches it as a refusal: fails closed.
    assert isinstance(held.value, Denied)
    service.alice.approve(held.value.approval_id)

    # Changed arguments are another call: held again, never run under the first approval.
    with pytest.raises(Held) as other:
        transfer("40000.00", "account-B")
    assert other.value.approval_id != held.value.approval_id
    assert ran == []

    assert transfer("40000.00", "account-A") == "sent"
    assert ran == [("40000.00", "account-A")]
    # The grant was single-use: the same call again needs a new approval.
    with pytest.raises(Held) as third:
        transfer("40000.00", "account-A")
    assert third.value.approval_id not in (held.value.approval_id, other.value.approval_id)
    assert ran == [("40000.00", "account-A")]


def test_the_decorator_waits_and_refuses_arguments_changed_meanwhile(service, tmp_path):
    payee = {"iban": "DE89-A"}

    def approve_after_tampering(approval_id, url):
        def later():
            payee["iban"] = "DE89-MALLORY"  # the argument object changes while held
            service.alice.approve(approval_id)
        threading.Thread(target=later).start()

    gw = gateway(service, tmp_path, on_pending=approve_after_tampering)
    ran = []

    @gw.requires_approval(tool="payments.transfer", wait=True, max_wait=30)
    def transfer(amount: str, payee: dict):
        ran.append(dict(payee))

    with pytest.raises(Denied) as e:
        transfer("5.00", payee)
    assert e.value.reason_code is ReasonCode.BINDING_MISMATCH
    assert ran == []


def test_the_decorator_waits_when_asked(service, tmp_path):
    gw = gateway(service, tmp_path, on_pending=lambda id, url: service.alice.approve(id))

    @gw.requires_approval(tool="payments.transfer", wait=True, max_wait=30)
    def transfer(amount: str, to: str = "account-A"):
        return (amount, to)

    assert transfer("7.00") == ("7.00", "account-A")


def test_the_decorator_refuses_a_refusal(service, tmp_path):
    gw = gateway(service, tmp_path, on_pending=lambda id, url: service.alice.refuse(id))

    @gw.requires_approval(tool="payments.transfer", wait=True, max_wait=30)
    def transfer(amount: str):
        raise AssertionError("must not run")

    with pytest.raises(Denied) as e:
        transfer("9.00")
    assert e.value.reason_code is ReasonCode.APPROVER_REFUSED and not isinstance(e.value, Held)


def test_a_wrong_token_is_refused_and_nothing_is_created(service, tmp_path):
    gw = gateway(service, tmp_path)
    gw._token = "not-a-gateway-token"
    auth = gw.authorize("payments.transfer", '{"n":"1"}', "agent-7")
    assert not auth.allowed and auth.approval_id is None
    assert "401" in auth.detail and "unauthenticated" in auth.detail


def test_inadmissible_params_are_refused_before_asking_anyone(tmp_path):
    gw = countersign.Gateway(
        "http://127.0.0.1:9", "token", countersign.Registry.from_json('{"credentials": []}'),
        countersign.Policy(testing.RP_ID, [testing.ORIGIN]), countersign.ReplayState.memory(),
        timeout=1,
    )
    for params in ['{"a":1,"a":2}', "[1]", "not json", b"\xff"]:
        auth = gw.authorize("payments.transfer", params, "agent-7")
        assert auth.reason_code is ReasonCode.ACTION_INADMISSIBLE, (params, auth)


def test_giving_up_withdraws_the_request(service, tmp_path):
    gw = gateway(service, tmp_path, poll_wait=1, max_hold=0.01)
    auth = gw.authorize("payments.transfer", '{"n":"2"}', "agent-7")
    assert auth.reason_code is ReasonCode.CANCELLED
    # The service settled it as withdrawn: nobody can approve it any more.
    _, result = http("GET", f"{service.base}/v1/approvals/{auth.approval_id}", token=service.token)
    assert result["status"] == "DENIED" and result["reason_code"] == "cancelled"


def _offline_gateway(url):
    return countersign.Gateway(
        url, "token", countersign.Registry.from_json('{"credentials": []}'),
        countersign.Policy(testing.RP_ID, [testing.ORIGIN]), countersign.ReplayState.memory(),
        timeout=2,
    )


def test_a_redrive_url_on_localhost_is_the_same_loopback_service():
    # The service names itself as a browser opens it: localhost for 127.0.0.1, same port.
    gw = _offline_gateway("http://127.0.0.1:18080")
    gw._check_redrive("apv_1", "http://localhost:18080/v1/approvals/apv_1")
    gw._check_redrive("apv_1", "http://127.0.0.1:18080/v1/approvals/apv_1")
    _offline_gateway("http://[::1]:18080/")._check_redrive(
        "apv_1", "http://localhost:18080/v1/approvals/apv_1"
    )


@pytest.mark.parametrize(
    "given",
    [
        "http://localhost:18081/v1/approvals/apv_1",  # another port
        "https://localhost:18080/v1/approvals/apv_1",  # another scheme
        "http://evil.example:18080/v1/approvals/apv_1",  # another host
        "http://127.0.0.2.example:18080/v1/approvals/apv_1",  # a name, not a loopback address
        "http://localhost:18080/v1/approvals/apv_2",  # another approval
    ],
)
def test_a_redrive_url_elsewhere_is_refused(given):
    gw = _offline_gateway("http://127.0.0.1:18080")
    with pytest.raises(Exception) as e:
        gw._check_redrive("apv_1", given)
    assert e.value.reason_code is ReasonCode.RESULT_MALFORMED
