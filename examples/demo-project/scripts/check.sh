#!/bin/sh
# Runs the test suite.
set -e
cd "$(dirname "$0")/.."
python3 -m unittest discover -s tests -v
