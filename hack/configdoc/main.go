// Command configdoc writes docs/configuration.md, the reference of every
// config key, from the help the code gives each key. make docs runs it; a
// test in package app fails while the file is stale.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"

	"github.com/kube-sunset/sunset/app"
)

func main() {
	out := flag.String("o", "docs/configuration.md", "file to write")
	flag.Parse()
	var b bytes.Buffer
	if err := app.WriteReference(&b); err != nil {
		fmt.Fprintln(os.Stderr, "configdoc:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(*out, b.Bytes(), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "configdoc:", err)
		os.Exit(1)
	}
}
