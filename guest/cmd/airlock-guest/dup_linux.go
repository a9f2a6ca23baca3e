package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// dupOnto makes descriptor fd a copy of f (linux/arm64 has no dup2).
func dupOnto(f *os.File, fd int) error { return unix.Dup3(int(f.Fd()), fd, 0) }
