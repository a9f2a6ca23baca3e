//go:build !linux

package agent

import (
	"context"
	"errors"
)

// errNotLinux: the guest is always Linux; elsewhere the agent only serves
// as a plain process (for development).
var errNotLinux = errors.New("only supported on Linux")

func kernelRelease() string { return "" }

// BecomeSubreaper is only supported on Linux.
func BecomeSubreaper() error { return errNotLinux }

// Init is only supported on Linux.
func Init(ctx context.Context, builtin func(args []string) Builtin) error { return errNotLinux }

// PrepareDockerKernel is only supported on Linux.
func PrepareDockerKernel() (string, error) { return "", errNotLinux }

// StartDocker is only supported on Linux.
func StartDocker(ctx context.Context) (string, error) { return "", errNotLinux }

// StartContainerProxy is only supported on Linux.
func StartContainerProxy(ctx context.Context, user string) (string, error) { return "", errNotLinux }

// ProxyRelay is only supported on Linux.
func ProxyRelay(listen, target string) error { return errNotLinux }
