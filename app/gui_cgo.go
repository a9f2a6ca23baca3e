//go:build cgo

package main

import (
	"github.com/airlock-dev/airlock/app/cli"
	"github.com/airlock-dev/airlock/app/gui/desktop"
)

// guiOption gives the command line the desktop app. fyne needs cgo (GL
// and the windowing system); a build without cgo has only the commands.
func guiOption() []cli.Option { return []cli.Option{cli.WithGUI(desktop.Run)} }
