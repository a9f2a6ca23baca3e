//go:build !linux

package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// dupOnto makes descriptor fd a copy of f. The guest binary runs on Linux
// only; this keeps the package building everywhere for vet.
func dupOnto(f *os.File, fd int) error { return unix.Dup2(int(f.Fd()), fd) }
