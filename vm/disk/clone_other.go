//go:build !linux && !darwin

package disk

import "os"

// fileClone: this OS has no file clone Airlock knows of.
func fileClone() (Method, func(src, dst string) error) { return "", nil }

// reflink: this OS has no file clone Airlock knows of.
func reflink(src, dst *os.File) error { return errNoReflink }
