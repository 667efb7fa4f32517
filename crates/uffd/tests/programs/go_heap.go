// A heap of 256 MiB filled with a pattern; prints "ready", waits for a line on stdin, then
// checks every word and prints how many were wrong. Go's runtime makes its own system calls:
// nothing of uzswap's can be preloaded into it.
package main

import (
	"bufio"
	"fmt"
	"os"
)

func main() {
	p := make([]uint64, 32<<20)
	for i := range p {
		p[i] = uint64(i) * 0x9E3779B97F4A7C15
	}
	fmt.Println("ready")
	bufio.NewReader(os.Stdin).ReadString('\n')
	bad := 0
	for i := range p {
		if p[i] != uint64(i)*0x9E3779B97F4A7C15 {
			bad++
		}
	}
	fmt.Println("bad", bad)
}
