package sandbox

import (
	"context"

	"github.com/airlock-dev/airlock/sync/manifest"
	"github.com/airlock-dev/airlock/sync/objects"
	"github.com/airlock-dev/airlock/sync/transfer"
)

// DefaultTransfer is the transfer the pipeline uses when RunOptions has
// none: sync/transfer over the machine's SFTP and exec channels.
func DefaultTransfer() Transfer { return syncTransfer{} }

// syncTransfer adapts sync/transfer to Transfer.
type syncTransfer struct{}

var _ transfer.Remote = Machine(nil)

func (syncTransfer) Push(ctx context.Context, m Machine, dest string, base *manifest.Manifest, store *objects.Store, progress func(done, total int)) error {
	_, err := transfer.Push(ctx, m, dest, base, store, transfer.Options{Progress: func(p transfer.Progress) {
		if progress != nil {
			progress(p.Files, p.FilesTotal)
		}
	}})
	return err
}

func (syncTransfer) Manifest(ctx context.Context, m Machine, dir string, limits manifest.Limits, excludes []string) (*manifest.Manifest, error) {
	return transfer.RemoteManifest(ctx, m, dir, transfer.Options{Limits: limits, Excludes: excludes})
}

func (syncTransfer) Pull(ctx context.Context, m Machine, dir string, changes []manifest.Change, store *objects.Store, progress func(done, total int)) error {
	_, err := transfer.Pull(ctx, m, dir, changes, store, transfer.Options{Progress: func(p transfer.Progress) {
		if progress != nil {
			progress(p.Files, p.FilesTotal)
		}
	}})
	return err
}
