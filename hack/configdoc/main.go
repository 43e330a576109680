// Command configdoc writes docs/configuration.md, the reference of every
// config key, from the help the code gives each key, in sections by task
// (serving, inputs, credentials, storage, limits, ...). The sections are
// config's keyGroups, beside the keys, so that package config's tests hold
// every key to a section and the file to what this writes. make docs runs
// it.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"

	"github.com/kube-sunset/sunset/config"
)

func main() {
	out := flag.String("o", "docs/configuration.md", "file to write")
	flag.Parse()
	var b bytes.Buffer
	if err := config.WriteReference(&b); err != nil {
		fmt.Fprintln(os.Stderr, "configdoc:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(*out, b.Bytes(), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "configdoc:", err)
		os.Exit(1)
	}
}
