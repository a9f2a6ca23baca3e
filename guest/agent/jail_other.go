//go:build !linux

package agent

import (
	"errors"
	"strings"
)

// JailWritable are the directories every jailed command may write below
// (the jail is Linux's: the guest's).
var JailWritable = []string{"/tmp", "/var/tmp", "/dev/pts", "/dev/shm", "/dev/mqueue"}

// Jail is Linux's only: the guest is always Linux.
func Jail(write []string, home string, argv, env []string) error {
	return errors.New("jail: only in a Linux guest")
}

// JailProbe is Linux's only.
func JailProbe(w *strings.Builder, outside string) {
	w.WriteString("jail: only in a Linux guest\n")
}

// JailDenials is Linux's only.
func JailDenials() (map[string]int, error) {
	return nil, errors.New("jail: only in a Linux guest")
}
