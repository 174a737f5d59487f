// Command inorder is an ordering-preserving Kafka proxy.
package main

import (
	"os"

	"github.com/inorder-proxy/inorder/cmd"
)

func main() {
	os.Exit(cmd.Main(os.Args[1:]))
}
