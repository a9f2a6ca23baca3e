#!/bin/sh
# Builds a source archive of wordfreq into dist/.
set -e
cd "$(dirname "$0")/.."
mkdir -p dist
tar -czf dist/wordfreq.tar.gz README.md wordfreq
echo "wrote dist/wordfreq.tar.gz"
