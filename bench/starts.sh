#!/bin/bash
# What starting a process costs under `uzswap run`: a shell that starts 200 programs
# (/bin/true), plain and under `uzswap run --memory-high 2G` alternately, 5 rounds; prints
# each run, the medians, and the cost a process beyond its plain start.
# Run from the repository after `cargo build --release`: bash bench/starts.sh
# (OTHER=/path/to/another/uzswap adds that build's `uzswap run` as a third column.)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
uzswap=$here/../target/release/uzswap
n=200
script=$(mktemp)
echo "for i in \$(seq $n); do /bin/true; done" > "$script"
seconds() { local s; s=$(date +%s.%N); "$@" > /dev/null; echo "$(date +%s.%N) - $s" | bc; }
plain=(); under=(); other=()
for _ in 1 2 3 4 5; do
  plain+=("$(seconds bash "$script")")
  under+=("$(seconds "$uzswap" run --memory-high 2G -- bash "$script")")
  if [ -n "${OTHER:-}" ]; then
    other+=("$(seconds "$OTHER" run --memory-high 2G -- bash "$script")")
  fi
done
median() { printf "%s\n" "$@" | sort -n | sed -n 3p; }
p=$(median "${plain[@]}")
u=$(median "${under[@]}")
echo "plain ${plain[*]} | median $p"
echo "uzswap run ${under[*]} | median $u | $(echo "scale=2; ($u - $p) * 1000 / $n" | bc) ms a process more"
if [ -n "${OTHER:-}" ]; then
  o=$(median "${other[@]}")
  echo "$OTHER run ${other[*]} | median $o | $(echo "scale=2; ($o - $p) * 1000 / $n" | bc) ms a process more"
fi
rm -f "$script"
