//go:build darwin && cgo && !arm64

package vz

import "github.com/airlock-dev/airlock/vm/vz/vzconfig"

// Rosetta is never available on an Intel Mac: Rosetta for Linux runs
// x86-64 binaries in arm64 guests on Apple silicon (vz's Rosetta API exists
// in arm64 builds only).
func Rosetta() vzconfig.RosettaState { return vzconfig.RosettaNotSupported }
