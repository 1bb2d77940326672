"""Unit tests of harness.py's standing-grant scope: the path rule read and applied through paths.py
(SPEC §14.4), each once kept and once broken. Run: python3 -m unittest discover
conformance/adapters/py_webauthn"""
import unittest

from harness import OutOfScope, check_coverage, read_scope

CALLS = {"profile": "countersign.tool-call/1", "gateways": ["ci-gw"]}


def grant(rule):
    return {"calls": CALLS, "agent_id": "agent-7", "tool_name": "files.read", "constraints": [rule],
            "max_uses": 5, "expires_at": "2026-11-21T10:00:00Z"}


def read(path):
    return {"profile": "countersign.tool-call/1", "agent_id": "agent-7", "tool_name": "files.read",
            "params": {"path": path}}


DATA = {"kind": "path", "arg": "/path", "under": "/srv/data"}


class StandingPathRule(unittest.TestCase):
    def test_a_path_inside_the_directory_is_covered(self):
        scope = read_scope(grant(DATA))
        for path in ["/srv/data", "/srv/data/q3/report.pdf", "/srv//data/./q3/"]:
            check_coverage(scope, 1, read(path))

    def test_a_path_outside_or_read_two_ways_is_out_of_scope(self):
        scope = read_scope(grant(DATA))
        for path in ["/srv/data2/x", "/srv/data/../../etc/shadow", "/srv/data/q3/../q4", "srv/data/x",
                     "/srv/data\\x", "/srv/data/%2e%2e/x", "//srv/data/x", 7, ["/srv/data"]]:
            with self.assertRaises(OutOfScope, msg=repr(path)):
                check_coverage(scope, 1, read(path))

    def test_a_directory_not_in_normal_form_makes_the_grant_unreadable(self):
        for under in ["/srv/data/", "/srv/../data", "srv/data", 3]:
            with self.assertRaises(ValueError, msg=repr(under)):
                read_scope(grant({"kind": "path", "arg": "/path", "under": under}))
        with self.assertRaises(ValueError):
            read_scope(grant({"kind": "path", "arg": "/path", "under": "/srv/data", "prefix": "x"}))

    def test_a_string_prefix_holding_a_separator_makes_the_grant_unreadable(self):
        read_scope(grant({"kind": "prefix", "arg": "/path", "prefix": "report-"}))
        for prefix in ["/srv/data/", "C:\\data", ""]:
            with self.assertRaises(ValueError, msg=repr(prefix)):
                read_scope(grant({"kind": "prefix", "arg": "/path", "prefix": prefix}))


if __name__ == "__main__":
    unittest.main()
