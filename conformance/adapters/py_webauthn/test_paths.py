"""Unit tests of paths.py: each rule once kept, once broken. Run: python3 -m unittest discover
conformance/adapters/py_webauthn"""
import unittest

from paths import PathRefused, path_covers, path_names, path_under, prefix_text_readable


class PathRule(unittest.TestCase):
    def test_posix_spellings_are_read(self):
        self.assertEqual(path_names("/srv//data/./q3/"), ["srv", "data", "q3"])
        self.assertEqual(path_names("/"), [])
        self.assertEqual(path_names("/srv/data/..."), ["srv", "data", "..."])

    def test_ambiguous_spellings_are_refused(self):
        for text in ["/srv/data/../../etc/shadow", "/srv/data/a/../b", "srv/data", "//srv",
                     "/srv\\data", "/srv/%2e%2e", "/srv/a\0b", "/srv/a\x85", "/" + "a" * 4096]:
            with self.assertRaises(PathRefused, msg=repr(text)):
                path_names(text)

    def test_covers_compares_whole_names(self):
        self.assertTrue(path_covers("/srv/data", "/srv/data"))
        self.assertTrue(path_covers("/srv/data", "/srv/data/q3/report.pdf"))
        self.assertTrue(path_covers("/", "/etc/hosts"))
        self.assertFalse(path_covers("/srv/data", "/srv/data2/x"))
        self.assertFalse(path_covers("/srv/data", "/srv/data/../../etc/shadow"))
        self.assertFalse(path_covers("/srv/data", "/SRV/data/x"))
        self.assertFalse(path_covers("/srv/data", ["/srv/data"]))

    def test_directory_must_be_normal(self):
        self.assertEqual(path_under("/srv/data"), ["srv", "data"])
        for text in ["/srv/data/", "/srv//data", "/srv/./data", "srv/data", ""]:
            with self.assertRaises(PathRefused, msg=repr(text)):
                path_under(text)

    def test_prefix_text_holds_no_separator(self):
        self.assertTrue(prefix_text_readable("ops-"))
        for text in ["/srv/data/", "refs/heads/", "C:\\data", ""]:
            self.assertFalse(prefix_text_readable(text), text)


if __name__ == "__main__":
    unittest.main()
