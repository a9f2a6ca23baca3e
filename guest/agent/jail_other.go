//go:build !linux

package agent

import (
	"errors"
	"io"
)

// Jail is Linux's only: the guest is always Linux.
func Jail(write []string, home string, argv, env []string) error {
	return errors.New("jail: only in a Linux guest")
}

// JailProbe is Linux's only.
func JailProbe(w io.Writer, outside string) {
	io.WriteString(w, "jail: only in a Linux guest\n")
}

// JailDenials is Linux's only.
func JailDenials() (map[string]int, error) {
	return nil, errors.New("jail: only in a Linux guest")
}
