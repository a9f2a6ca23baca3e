package pipeline

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

// Push pushes base, then seeds the guest with it: the collect after the
// command then reads only the files the command touched and brings back
// only the changes.
func (syncTransfer) Push(ctx context.Context, m Machine, dest string, base *manifest.Manifest, store *objects.Store, progress func(done, total int)) (transfer.Known, error) {
	_, err := transfer.Push(ctx, m, dest, base, store, transfer.Options{Progress: func(p transfer.Progress) {
		if progress != nil {
			progress(p.Files, p.FilesTotal)
		}
	}})
	if err != nil {
		return transfer.Known{}, err
	}
	return transfer.Seed(ctx, m, dest, base, transfer.Options{})
}

func (syncTransfer) Manifest(ctx context.Context, m Machine, dir string, since transfer.Known, limits manifest.Limits, excludes []string) (transfer.Known, error) {
	return transfer.RemoteManifest(ctx, m, dir, since, transfer.Options{Limits: limits, Excludes: excludes})
}

func (syncTransfer) Pull(ctx context.Context, m Machine, dir string, changes []manifest.Change, store *objects.Store, limits manifest.Limits, progress func(done, total int)) error {
	_, err := transfer.Pull(ctx, m, dir, changes, store, transfer.Options{Limits: limits, Progress: func(p transfer.Progress) {
		if progress != nil {
			progress(p.Files, p.FilesTotal)
		}
	}})
	return err
}
