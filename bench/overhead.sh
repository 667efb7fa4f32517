#!/bin/bash
# The cost of `uzswap run` with no memory pressure: each workload 5 times, plain and under
# `uzswap run` alternately, with a limit it never reaches; prints each run and the medians.
# Run from the repository after `cargo build --release`: bash bench/overhead.sh
# (needs python3, cc with static glibc, Go, and a JDK for the JVM row)
# (UZSWAP_RUN_FLAGS=--in-thread-faults adds that option to `uzswap run`; UZSWAP_ALSO_FLAGS=...
# runs `uzswap run` with those options too, in the same rounds, as a third column).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
uzswap=$here/../target/release/uzswap
cc -O2 -o /tmp/uzswap-mallocs "$here/../crates/cli/tests/programs/mallocs.c"
cc -O2 -static -o /tmp/uzswap-mallocs-static "$here/../crates/cli/tests/programs/mallocs.c"
go=$(command -v go || echo /usr/local/go/bin/go)
CGO_ENABLED=0 GO111MODULE=off GOCACHE=/tmp/uzswap-gocache "$go" build -o /tmp/uzswap-go-churn \
  "$here/../crates/cli/tests/programs/go_churn.go"
javac -d /tmp/uzswap-jvm "$here/jvm/Heap.java"
seconds() { local s; s=$(date +%s.%N); "$@" > /dev/null; echo "$(date +%s.%N) - $s" | bc; }
for w in "python3 $here/pyjob.py 600000" "/tmp/uzswap-mallocs 20" \
  "java -Xms640m -Xmx640m -XX:+AlwaysPreTouch -cp /tmp/uzswap-jvm Heap 7000" \
  "/tmp/uzswap-mallocs-static 20" "/tmp/uzswap-go-churn 96 2"; do
  plain=(); under=(); also=()
  for _ in 1 2 3 4 5; do
    plain+=("$(seconds $w)")
    under+=("$(seconds "$uzswap" run --memory-high 4G ${UZSWAP_RUN_FLAGS:-} -- $w)")
    if [ -n "${UZSWAP_ALSO_FLAGS:-}" ]; then
      also+=("$(seconds "$uzswap" run --memory-high 4G $UZSWAP_ALSO_FLAGS -- $w)")
    fi
  done
  p=$(printf "%s\n" "${plain[@]}" | sort -n | sed -n 3p)
  u=$(printf "%s\n" "${under[@]}" | sort -n | sed -n 3p)
  echo "$w | plain ${plain[*]} | uzswap ${under[*]} | medians $p $u | ratio $(echo "scale=3; $u / $p" | bc)"
  if [ -n "${UZSWAP_ALSO_FLAGS:-}" ]; then
    a=$(printf "%s\n" "${also[@]}" | sort -n | sed -n 3p)
    echo "  with $UZSWAP_ALSO_FLAGS: ${also[*]} | median $a | ratio $(echo "scale=3; $a / $p" | bc)"
  fi
done
rm -rf /tmp/uzswap-mallocs /tmp/uzswap-mallocs-static /tmp/uzswap-go-churn /tmp/uzswap-jvm
