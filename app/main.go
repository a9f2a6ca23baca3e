// Command airlock runs coding agents inside throwaway Linux VMs and lets you
// review their changes before anything reaches your project. This file is
// only the entry point; the commands live in app/cli and the desktop app in
// app/gui.
//
// It must not import directly anything of Airlock's but app/cli, app/gui and
// app/gui/desktop: it hands the desktop app to the CLI (cli.WithGUI), which
// is why it is, with app/gui, the only package that depends on fyne.
package main

import (
	"os"

	"github.com/airlock-dev/airlock/app/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, guiOption()...))
}
