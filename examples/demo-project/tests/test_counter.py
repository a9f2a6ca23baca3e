import unittest

from wordfreq import count_words, top_words


class CounterTest(unittest.TestCase):
    def test_counts_case_insensitively(self):
        self.assertEqual(count_words("The cat and the hat")["the"], 2)

    def test_top_words(self):
        self.assertEqual(top_words("a b a c a b", 2), [("a", 3), ("b", 2)])

    def test_rejects_zero(self):
        with self.assertRaises(ValueError):
            top_words("a", 0)


if __name__ == "__main__":
    unittest.main()
