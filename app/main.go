// Command airlock runs coding agents inside throwaway Linux VMs and lets you
// review their changes before anything reaches your project. This file is
// only the entry point; the commands live in app/cli and the desktop app in
// app/gui.
package main

import (
	"os"

	"github.com/airlock-dev/airlock/app/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, guiOption()...))
}
