#!/bin/bash
# sort(1) of a large file: lines generated (deterministic), sorted in memory, checksummed.
# Usage: sort.sh [LINES] (default 3,000,000, a file of about 100 MB).
set -euo pipefail
lines=${1:-3000000}
file=$(mktemp /var/tmp/uzswap-suite-sort.XXXXXX)
trap 'rm -f "$file"' EXIT
awk -v n="$lines" 'BEGIN { x = 1; for (i = 0; i < n; i++) { x = (x * 1103515245 + 12345) % 2147483648; printf "%010d %s-%d\n", x, "payload-for-sorting", i } }' > "$file"
LC_ALL=C sort -S 1G "$file" | md5sum
