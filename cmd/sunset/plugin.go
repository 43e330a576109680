package main

import (
	"path/filepath"
	"regexp"
	"strings"

	"github.com/spf13/cobra"
)

// kubectl runs `kubectl sunset ARGS` as the first kubectl-sunset on PATH,
// with ARGS unchanged, its own global flags included; krew links the
// installed binary under that name. For `kubectl sunset <TAB>` kubectl
// runs kubectl_complete-sunset ARGS, which is to answer as
// `kubectl-sunset __complete ARGS` would.
const (
	pluginName           = "kubectl-sunset"
	pluginCompletionName = "kubectl_complete-sunset"
)

// pluginArgs tells, from argv0 (the name the binary was started by),
// whether kubectl runs it as a plugin, and the arguments to run.
func pluginArgs(argv0 string, args []string) (plugin bool, _ []string) {
	switch strings.TrimSuffix(filepath.Base(argv0), ".exe") {
	case pluginName:
		return true, args
	case pluginCompletionName:
		return true, append([]string{cobra.ShellCompRequestCmd}, args...)
	}
	return false, args
}

// exampleCommand is the start of an example's command line.
var exampleCommand = regexp.MustCompile(`(?m)^(\s*)sunset `)

// presentAsKubectlPlugin makes usage lines and examples say
// `kubectl sunset`, which is what a plugin's user types.
func presentAsKubectlPlugin(root *cobra.Command) {
	if root.Annotations == nil {
		root.Annotations = map[string]string{}
	}
	root.Annotations[cobra.CommandDisplayNameAnnotation] = "kubectl sunset"
	var rename func(*cobra.Command)
	rename = func(c *cobra.Command) {
		c.Example = exampleCommand.ReplaceAllString(c.Example, "${1}kubectl sunset ")
		for _, sub := range c.Commands() {
			rename(sub)
		}
	}
	rename(root)
}
