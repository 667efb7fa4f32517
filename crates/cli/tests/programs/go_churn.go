// A Go program (statically linked: it loads nothing of uzswap's) with a heap of 64 KiB
// blocks, read and checked at random and replaced a quarter of the time, the old ones left
// to the garbage collector. Prints "bad N" (blocks found changed) and exits 1 if N > 0.
// Usage: go_churn MIB ROUNDS
package main

import (
	"fmt"
	"math/rand"
	"os"
	"strconv"
)

func fill(b []byte, seed int) {
	for i := range b {
		b[i] = byte(seed*31 + i/64)
	}
}

func main() {
	mib, _ := strconv.Atoi(os.Args[1])
	rounds, _ := strconv.Atoi(os.Args[2])
	n := mib * 16 // 64 KiB blocks
	blocks := make([][]byte, n)
	seeds := make([]int, n)
	for i := range blocks {
		blocks[i] = make([]byte, 64<<10)
		seeds[i] = i
		fill(blocks[i], i)
	}
	r := rand.New(rand.NewSource(1))
	bad := 0
	for k := 0; k < rounds*n; k++ {
		i := r.Intn(n)
		b := blocks[i]
		want := make([]byte, len(b))
		fill(want, seeds[i])
		for j := range b {
			if b[j] != want[j] {
				bad++
				break
			}
		}
		if r.Intn(4) == 0 {
			seeds[i] = k
			blocks[i] = make([]byte, 64<<10) // the old one is garbage
			fill(blocks[i], k)
		}
	}
	fmt.Println("bad", bad)
	if bad != 0 {
		os.Exit(1)
	}
}
