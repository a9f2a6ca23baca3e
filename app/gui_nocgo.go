//go:build !cgo

package main

import "github.com/airlock-dev/airlock/app/cli"

// guiOption is empty without cgo: fyne cannot be built, and `airlock gui`
// says so.
func guiOption() []cli.Option { return nil }
