// A starter module for the go-build sandbox: bluebox run <name> -- go run .
package main

import (
	"fmt"
	"runtime"
)

func main() {
	fmt.Printf("hello from %s on %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
