package vm

import "context"

// Restorer is an optional Backend capability: start a machine from the
// state a Snapshotter saved. spec must describe the machine that was saved:
// the same devices and the same StateDir, where backends keep a machine's
// persisted identity. The restored machine is running; guest-link
// connections of the saved machine are gone, so dial anew. A backend or
// host that cannot restore returns an error wrapping ErrNotSupported.
type Restorer interface {
	Restore(ctx context.Context, spec Spec, path string) (Machine, error)
}
