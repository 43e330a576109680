// Command etcd is etcd's own server main, built from its Go module so the
// end-to-end test needs no download besides the module proxy.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
