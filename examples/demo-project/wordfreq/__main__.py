"""python3 -m wordfreq [-n N] FILE"""

import argparse

from .counter import top_words


def main():
    parser = argparse.ArgumentParser(prog="wordfreq")
    parser.add_argument("-n", type=int, default=10, help="how many words")
    parser.add_argument("file")
    args = parser.parse_args()
    with open(args.file, encoding="utf-8") as f:
        for word, count in top_words(f.read(), args.n):
            print(f"{count:6d} {word}")


if __name__ == "__main__":
    main()
